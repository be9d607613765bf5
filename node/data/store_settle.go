package data

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ipfs/boxo/datastore/dshelp"
	blocks "github.com/ipfs/go-block-format"
	ds "github.com/ipfs/go-datastore"
	"github.com/ipfs/go-datastore/query"
	mh "github.com/multiformats/go-multihash"
	lvl "github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

// unsettledPrefix holds, in the index, the key of every block of a write
// whose files may not be on the disk yet: written (synced) before the
// block files are, deleted once they are synced. An open finds here only
// the blocks of a write a crash cut short, and checks them (settle).
var unsettledPrefix = ds.NewKey("/unsettled")

// putSettled writes fresh (blocks not in the store) so that each is whole
// or absent after a power cut, at one filesystem sync per write instead
// of one per block file:
//
//  1. the blocks' keys go into the index as unsettled, synced;
//  2. flatfs writes the files without syncing them (a temporary file
//     each, renamed into place);
//  3. one sync of the filesystem (syncBlocks) makes the files and the
//     renames durable;
//  4. the keys are deleted from the index, unsynced: the next synced
//     write carries the delete, and a delete lost to a crash only makes
//     the next open check blocks that are whole.
//
// A crash between 2 and 3 can leave a file empty or cut under its final
// name (ext4's delayed allocation commits the rename before the data);
// the next open finds its key in step 1's record and deletes what does
// not hash to it. A sync per file, as flatfs does with its sync option,
// spends about twice the kernel time per block, and a fetch spends that
// time on the cores it needs for the network (docs/PERFORMANCE.md,
// "Fetch against its limits"). The caller holds s.mu.
func (s *Store) putSettled(ctx context.Context, raw interface {
	PutMany(context.Context, []blocks.Block) error
}, fresh []blocks.Block) error {
	intent := new(lvl.Batch)
	for _, b := range fresh {
		intent.Put(unsettledKey(b).Bytes(), nil)
	}
	if err := s.db.DB.Write(intent, &opt.WriteOptions{Sync: true}); err != nil {
		return fmt.Errorf("record %d blocks as unsettled: %w", len(fresh), err)
	}
	if err := raw.PutMany(ctx, fresh); err != nil {
		return err
	}
	if err := s.syncBlocks(); err != nil {
		return fmt.Errorf("sync %d block files: %w", len(fresh), err)
	}
	settled := new(lvl.Batch)
	for _, b := range fresh {
		settled.Delete(unsettledKey(b).Bytes())
	}
	if err := s.db.DB.Write(settled, &opt.WriteOptions{Sync: false}); err != nil {
		return fmt.Errorf("record %d blocks as settled: %w", len(fresh), err)
	}
	return nil
}

func unsettledKey(b blocks.Block) ds.Key {
	return unsettledPrefix.Child(dshelp.MultihashToDsKey(b.Cid().Hash()))
}

// settle checks, at open, the blocks of every write a crash cut short:
// a block file that does not hash to its key (empty or cut by a power
// cut) is deleted, so that the store never answers Has for bytes it does
// not hold; one that does stays. Then the record is cleared. A clean
// history costs one empty range scan.
func (s *Store) settle(ctx context.Context) (checked, dropped int, err error) {
	res, err := s.db.Query(ctx, query.Query{Prefix: unsettledPrefix.String(), KeysOnly: true})
	if err != nil {
		return 0, 0, err
	}
	var keys []ds.Key
	for r := range res.Next() {
		if r.Error != nil {
			res.Close()
			return 0, 0, r.Error
		}
		keys = append(keys, ds.RawKey(r.Key))
	}
	res.Close()
	if len(keys) == 0 {
		return 0, 0, nil
	}
	for _, k := range keys {
		blockKey := ds.NewKey(k.BaseNamespace())
		whole, err := s.blockIsWhole(ctx, blockKey)
		if err != nil {
			return checked, dropped, err
		}
		checked++
		if !whole {
			if err := s.blocks.Delete(ctx, blockKey); err != nil {
				return checked, dropped, fmt.Errorf("delete the cut block %s: %w", blockKey, err)
			}
			dropped++
		}
	}
	if err := s.syncBlocks(); err != nil {
		return checked, dropped, err
	}
	clear := new(lvl.Batch)
	for _, k := range keys {
		clear.Delete(k.Bytes())
	}
	if err := s.db.DB.Write(clear, &opt.WriteOptions{Sync: true}); err != nil {
		return checked, dropped, err
	}
	return checked, dropped, nil
}

// blockIsWhole reports whether the block file for key is absent (true:
// nothing to drop) or holds bytes that hash to key's multihash.
func (s *Store) blockIsWhole(ctx context.Context, key ds.Key) (bool, error) {
	v, err := s.blocks.Get(ctx, key)
	if err == ds.ErrNotFound {
		return true, nil
	}
	if err != nil {
		return false, nil // unreadable: dropped, and fetched again if wanted
	}
	want, err := dshelp.DsKeyToMultihash(key)
	if err != nil {
		return false, nil // not a key the store writes
	}
	dec, err := mh.Decode(want)
	if err != nil {
		return false, nil
	}
	got, err := mh.Sum(v, dec.Code, dec.Length)
	if err != nil {
		return false, nil
	}
	return bytes.Equal(got, want), nil
}
