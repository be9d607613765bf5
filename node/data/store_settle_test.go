package data

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/boxo/datastore/dshelp"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/ipfs/go-datastore/query"
	leveldb "github.com/ipfs/go-ds-leveldb"
)

// blockFile is where flatfs keeps c's block under the store at dir.
func blockFile(t *testing.T, dir string, c cid.Cid) string {
	t.Helper()
	name := dshelp.MultihashToDsKey(c.Hash()).String()[1:]
	p := filepath.Join(dir, blocksDir, shardOf(name), name+".data")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("block file of %s: %v", c, err)
	}
	return p
}

// unsettled lists the keys the index holds as unsettled.
func unsettled(t *testing.T, s *Store) []string {
	t.Helper()
	res, err := s.db.Query(context.Background(), query.Query{Prefix: unsettledPrefix.String(), KeysOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var keys []string
	for r := range res.Next() {
		keys = append(keys, r.Key)
	}
	return keys
}

// A write leaves nothing recorded as unsettled once it returns: an open
// after a clean history checks no block.
func TestStoreWriteLeavesNothingUnsettled(t *testing.T) {
	s := openStore(t, t.TempDir(), 64<<20)
	defer s.Close()
	bs := []blocks.Block{blocks.NewBlock([]byte("one")), blocks.NewBlock([]byte("two"))}
	if err := s.Blockstore().PutMany(context.Background(), bs); err != nil {
		t.Fatal(err)
	}
	if keys := unsettled(t, s); len(keys) != 0 {
		t.Fatalf("after a write returned, %d blocks are still recorded as unsettled: %v", len(keys), keys)
	}
}

// A power cut while a write's block files were not yet synced can leave a
// file empty or cut under its final name; the write's record of its
// blocks makes the next open check them. The cut ones are dropped (Has
// says no, so a fetch wants them again, and the byte count leaves them
// out), the whole ones stay, and the record is cleared.
func TestStoreDropsBlocksAPowerCutLeftCut(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, 64<<20)
	var bs []blocks.Block
	for i := range 4 {
		bs = append(bs, blocks.NewBlock([]byte(noise(uint64(30+i), 4096))))
	}
	if err := s.Blockstore().PutMany(ctx, bs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// What a power cut in the middle of writing bs[0..2] leaves: their
	// record in the index, bs[0]'s file empty and bs[1]'s cut short,
	// bs[2]'s whole; and no byte count from a clean close.
	if err := os.Truncate(blockFile(t, dir, bs[0].Cid()), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blockFile(t, dir, bs[1].Cid()), 1000); err != nil {
		t.Fatal(err)
	}
	db, err := leveldb.NewDatastore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs[:3] {
		if err := db.Put(ctx, unsettledKey(b), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Delete(ctx, metaUsed); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, 64<<20)
	defer s.Close()
	for i, want := range []bool{false, false, true, true} {
		has, err := s.Blockstore().Has(ctx, bs[i].Cid())
		if err != nil {
			t.Fatal(err)
		}
		if has != want {
			t.Errorf("block %d (cut: %v): Has = %v after the reopen, want %v", i, i < 2, has, want)
		}
	}
	if got, want := s.Used(), int64(2*4096); got != want {
		t.Errorf("used %d bytes after the reopen, want %d (the two whole blocks)", got, want)
	}
	if keys := unsettled(t, s); len(keys) != 0 {
		t.Errorf("the record of the cut write is still there: %v", keys)
	}
	// The dropped blocks can be written again.
	if err := s.Blockstore().PutMany(ctx, bs[:2]); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs[:2] {
		got, err := s.Blockstore().Get(ctx, b.Cid())
		if err != nil || string(got.RawData()) != string(b.RawData()) {
			t.Fatalf("block %s written again: %v", b.Cid(), err)
		}
	}
}
