package data

import (
	"context"
	"errors"
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

// spyPutter stands in for flatfs's blockstore under putSettled: it notes
// what the index records as unsettled when the files are written, then
// writes them through to real, or fails the write with fail.
type spyPutter struct {
	t        *testing.T
	s        *Store
	real     blockPutter
	fail     error
	recorded []string
}

func (p *spyPutter) PutMany(ctx context.Context, bs []blocks.Block) error {
	p.recorded = unsettled(p.t, p.s)
	if p.fail != nil {
		return p.fail
	}
	return p.real.PutMany(ctx, bs)
}

// The record comes first: by the time a block file is written, its key
// is in the index as unsettled, so a power cut at any point after that
// leaves the next open something to check.
func TestStoreRecordsBlocksBeforeWritingThem(t *testing.T) {
	s := openStore(t, t.TempDir(), 64<<20)
	defer s.Close()
	bs := []blocks.Block{blocks.NewBlock([]byte("one")), blocks.NewBlock([]byte("two"))}
	spy := &spyPutter{t: t, s: s, real: s.bs.(*quotaBlockstore).Blockstore}
	if err := s.putSettled(context.Background(), spy, bs); err != nil {
		t.Fatal(err)
	}
	want := []string{unsettledKey(bs[0]).String(), unsettledKey(bs[1]).String()}
	if !sameSet(spy.recorded, want) {
		t.Fatalf("recorded as unsettled while the files were written: %v, want %v", spy.recorded, want)
	}
	if keys := unsettled(t, s); len(keys) != 0 {
		t.Fatalf("after the write, still recorded: %v", keys)
	}
}

// A write that fails after its record (a full disk, a crash) leaves the
// record: the next open checks those blocks, drops the cut one and keeps
// the whole one, and clears the record.
func TestStoreChecksAFailedWriteAtTheNextOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir, 64<<20)
	whole, cut := blocks.NewBlock([]byte(noise(40, 4096))), blocks.NewBlock([]byte(noise(41, 4096)))
	if err := s.Blockstore().PutMany(ctx, []blocks.Block{whole, cut}); err != nil {
		t.Fatal(err)
	}
	spy := &spyPutter{t: t, s: s, fail: errors.New("no space left on device")}
	if err := s.putSettled(ctx, spy, []blocks.Block{whole, cut}); err == nil {
		t.Fatal("a failed write reported success")
	}
	if got := unsettled(t, s); len(got) != 2 {
		t.Fatalf("after the failed write, recorded %v; want both blocks", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blockFile(t, dir, cut.Cid()), 100); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, 64<<20)
	defer s.Close()
	for _, c := range []struct {
		b    blocks.Block
		want bool
	}{{whole, true}, {cut, false}} {
		if has, err := s.Blockstore().Has(ctx, c.b.Cid()); err != nil || has != c.want {
			t.Errorf("block %s after the reopen: Has = %v (%v), want %v", c.b.Cid(), has, err, c.want)
		}
	}
	if keys := unsettled(t, s); len(keys) != 0 {
		t.Errorf("the failed write's record outlived the reopen: %v", keys)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]bool{}
	for _, x := range a {
		seen[x] = true
	}
	for _, x := range b {
		if !seen[x] {
			return false
		}
	}
	return true
}
