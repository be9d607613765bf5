package data

import (
	"bytes"
	"context"
	"errors"
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
func (s *Store) putSettled(ctx context.Context, raw blockPutter, fresh []blocks.Block) error {
	keys := make([][]byte, len(fresh))
	intent := new(lvl.Batch)
	for i, b := range fresh {
		keys[i] = unsettledKey(b).Bytes()
		intent.Put(keys[i], nil)
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
	for _, k := range keys {
		settled.Delete(k)
	}
	if err := s.db.DB.Write(settled, &opt.WriteOptions{Sync: false}); err != nil {
		return fmt.Errorf("record %d blocks as settled: %w", len(fresh), err)
	}
	return nil
}

// blockPutter is the part of flatfs's blockstore putSettled writes
// through (a test's stand-in can look at the record as the files are
// written).
type blockPutter interface {
	PutMany(context.Context, []blocks.Block) error
}

func unsettledKey(b blocks.Block) ds.Key {
	return unsettledPrefix.Child(dshelp.MultihashToDsKey(b.Cid().Hash()))
}

// settle checks, at open, the blocks of every write a crash cut short:
// a block file that does not hash to its key (empty or cut by a power
// cut) is deleted, so that the store never answers Has for bytes it does
// not hold; one that does stays. Then the record is cleared. A clean
// history costs one empty range scan.
func (s *Store) settle(ctx context.Context) error {
	res, err := s.db.Query(ctx, query.Query{Prefix: unsettledPrefix.String(), KeysOnly: true})
	if err != nil {
		return err
	}
	var keys []ds.Key
	for r := range res.Next() {
		if r.Error != nil {
			res.Close()
			return r.Error
		}
		keys = append(keys, ds.RawKey(r.Key))
	}
	res.Close()
	if len(keys) == 0 {
		return nil
	}
	for _, k := range keys {
		blockKey := ds.NewKey(k.BaseNamespace())
		if !s.blockIsWhole(ctx, blockKey) {
			if err := s.blocks.Delete(ctx, blockKey); err != nil {
				return fmt.Errorf("delete the cut block %s: %w", blockKey, err)
			}
		}
	}
	if err := s.syncBlocks(); err != nil {
		return err
	}
	clear := new(lvl.Batch)
	for _, k := range keys {
		clear.Delete(k.Bytes())
	}
	return s.db.DB.Write(clear, &opt.WriteOptions{Sync: true})
}

// blockIsWhole reports whether the block file for key is absent (true:
// nothing to drop) or holds bytes that hash to key's multihash. A file
// that cannot be read, or a key the store does not write, is not whole:
// dropped, and fetched again if wanted.
func (s *Store) blockIsWhole(ctx context.Context, key ds.Key) bool {
	v, err := s.blocks.Get(ctx, key)
	if errors.Is(err, ds.ErrNotFound) {
		return true
	}
	if err != nil {
		return false
	}
	want, err := dshelp.DsKeyToMultihash(key)
	if err != nil {
		return false
	}
	dec, err := mh.Decode(want)
	if err != nil {
		return false
	}
	got, err := mh.Sum(v, dec.Code, dec.Length)
	return err == nil && bytes.Equal(got, want)
}
