package data

import (
	"context"
	"fmt"

	ds "github.com/ipfs/go-datastore"
	"github.com/ipfs/go-datastore/query"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// migrateBatch is how many blocks migrate moves per step: one synced
// flatfs batch, then one synced leveldb batch deleting them.
const migrateBatch = 64

// migrateHook, when set (tests), is called in each step after the batch
// is in flatfs and before it is deleted from leveldb, with the blocks
// moved before this batch; an error from it stops the migration there, as
// a crash would, with the batch in both stores.
var migrateHook func(moved int) error

// migrate moves the blocks of a leveldb-only store (the layout before
// flatfs: every block under /blocks in the leveldb database) into the
// file-per-block store, a batch at a time: each batch is written and
// synced into flatfs before it is deleted from leveldb, so a crash at any
// point loses nothing, and the next open carries on from what is left in
// leveldb (a block already moved is written again, to the same bytes).
// Pins are in the same database and stay where they are. A store without
// old blocks costs one empty range scan.
func (s *Store) migrate(ctx context.Context) error {
	res, err := s.db.Query(ctx, query.Query{Prefix: oldBlockPrefix.String()})
	if err != nil {
		return err
	}
	defer res.Close()
	moved := 0
	var keys []ds.Key
	var fb ds.Batch // made at the first block of each step
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		if err := fb.Commit(ctx); err != nil {
			return fmt.Errorf("migrate blocks to flatfs: %w", err)
		}
		// Durable before leveldb lets them go. A crash before this sync
		// may leave cut files; the next open moves the batch again,
		// over them.
		if err := s.syncBlocks(); err != nil {
			return fmt.Errorf("migrate blocks to flatfs: %w", err)
		}
		if migrateHook != nil {
			if err := migrateHook(moved); err != nil {
				return err
			}
		}
		lb, err := s.db.Batch(ctx)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := lb.Delete(ctx, k); err != nil {
				return err
			}
		}
		if err := lb.Commit(ctx); err != nil {
			return fmt.Errorf("migrate blocks to flatfs: %w", err)
		}
		moved += len(keys)
		keys, fb = keys[:0], nil
		return nil
	}
	for r := range res.Next() {
		if r.Error != nil {
			return r.Error
		}
		k := ds.RawKey(r.Key)
		if !oldBlockPrefix.IsAncestorOf(k) || len(k.Namespaces()) != 2 {
			continue // not a block key of boxo's blockstore
		}
		if fb == nil {
			if fb, err = s.blocks.Batch(ctx); err != nil {
				return err
			}
		}
		if err := fb.Put(ctx, ds.NewKey(k.BaseNamespace()), r.Value); err != nil {
			return fmt.Errorf("migrate block %s: %w", k, err)
		}
		keys = append(keys, k)
		if len(keys) == migrateBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if moved > 0 {
		// The deleted blocks' bytes go back to the disk only when
		// leveldb compacts the tables that held them: all of them, now.
		if err := s.db.DB.CompactRange(util.Range{}); err != nil {
			return fmt.Errorf("compact the index after migrating %d blocks: %w", moved, err)
		}
	}
	return nil
}
