package data

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	"github.com/ipfs/boxo/exchange/offline"
	"github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/ipfs/go-datastore/query"
	leveldb "github.com/ipfs/go-ds-leveldb"
)

// oldStore writes a store as the code before the file-per-block layout
// did, through go-ds-leveldb directly: blocks under /blocks in the leveldb
// database at dir (boxo's blockstore namespace), pins under /pins. It
// holds the tree at src (pinned to last), a second file pinned until
// until, and loose unpinned raw blocks, enough for several migration
// steps. It returns the roots and the loose blocks.
func oldStore(t *testing.T, dir, src string, until time.Time, loose int) (root, lapsing cid.Cid, extra []blocks.Block) {
	t.Helper()
	ctx := context.Background()
	db, err := leveldb.NewDatastore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	bs := blockstore.NewBlockstore(db)
	dag := merkledag.NewDAGService(blockservice.New(bs, offline.Exchange(bs)))
	root, err = Import(ctx, dag, src, CIDv1)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put(ctx, pinPrefix.ChildString(root.String()), nil); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	writeFiles(t, other, map[string]string{"out.bin": noise(21, ChunkSize+7)})
	lapsing, err = Import(ctx, dag, other, CIDv1)
	if err != nil {
		t.Fatal(err)
	}
	var exp [8]byte // retention.go's encoding: big-endian Unix seconds
	binary.BigEndian.PutUint64(exp[:], uint64(until.Unix()))
	if err := db.Put(ctx, pinPrefix.ChildString(lapsing.String()), exp[:]); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(22, 22))
	for i := 0; i < loose; i++ {
		data := make([]byte, 1+rng.IntN(4000))
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		b, err := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: 0x12, MhLength: -1}.Sum(data)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := blocks.NewBlockWithCid(data, b)
		if err := bs.Put(ctx, blk); err != nil {
			t.Fatal(err)
		}
		extra = append(extra, blk)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return root, lapsing, extra
}

// oldBlocksLeft counts the blocks still in leveldb under /blocks.
func oldBlocksLeft(t *testing.T, dir string) int {
	t.Helper()
	db, err := leveldb.NewDatastore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Query(context.Background(), query.Query{Prefix: "/blocks", KeysOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	all, err := res.Rest()
	if err != nil {
		t.Fatal(err)
	}
	return len(all)
}

// sumBlocks is the bytes of every block in the store, each read back and
// checked against its CID: a torn or wrong block file fails the test.
func sumBlocks(t *testing.T, s *Store) (n int, bytes int64) {
	t.Helper()
	ctx := context.Background()
	keys, err := s.Blockstore().AllKeysChan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for c := range keys {
		b, err := s.Blockstore().Get(ctx, c)
		if err != nil {
			t.Fatalf("block %s: %v", c, err)
		}
		if got, err := c.Prefix().Sum(b.RawData()); err != nil || !got.Equals(c) {
			t.Fatalf("block %s: %d bytes on disk hash to %s (%v)", c, len(b.RawData()), got, err)
		}
		n++
		bytes += int64(len(b.RawData()))
	}
	return n, bytes
}

// checkMigrated: every block and pin of oldStore's fixture is in the
// store opened from it, the blocks in flatfs and none left in leveldb, the
// count equal to what is on disk.
func checkMigrated(t *testing.T, dir, src string, root, lapsing cid.Cid, until time.Time, extra []blocks.Block) {
	t.Helper()
	ctx := context.Background()
	s := openStore(t, dir, 1<<30)
	n, bytes := sumBlocks(t, s)
	if s.Used() != bytes {
		t.Fatalf("used %d, the migrated blocks sum to %d", s.Used(), bytes)
	}
	if n < len(extra)+3 {
		t.Fatalf("%d blocks after migration, want at least %d", n, len(extra)+3)
	}
	for _, b := range extra {
		if !has(t, s, b.Cid()) {
			t.Fatalf("loose block %s lost in migration", b.Cid())
		}
	}
	sameTree(t, s, root, src)
	if !pinned(t, s, root) || !pinned(t, s, lapsing) {
		t.Fatal("pins lost in migration")
	}
	got, ok, err := s.PinExpiry(ctx, lapsing)
	if err != nil || !ok || !got.Equal(until) {
		t.Fatalf("lapsing pin after migration: %v %v %v, want %v", got, ok, err, until)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := oldBlocksLeft(t, dir); left != 0 {
		t.Fatalf("%d blocks still in leveldb after migration", left)
	}
	files := 0
	filepath.WalkDir(filepath.Join(dir, blocksDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".data") {
			files++
		}
		return nil
	})
	if files != n {
		t.Fatalf("%d block files in %s, %d blocks", files, blocksDir, n)
	}
	// Opened again: nothing left to move, the same count, and GC takes
	// the loose blocks as before.
	s = openStore(t, dir, 1<<30)
	defer s.Close()
	if s.Used() != bytes {
		t.Fatalf("used %d at the second open, %d at the first", s.Used(), bytes)
	}
	res, err := s.GC(ctx)
	if err != nil || res.Removed != len(extra) {
		t.Fatalf("GC after migration removed %+v (%v), want the %d loose blocks", res, err, len(extra))
	}
	sameTree(t, s, root, src)
}

// A store written by the leveldb-only code is migrated at open: blocks
// into flatfs, pins kept, the count right.
func TestStoreMigratesLevelDBStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blocks")
	src := testTree(t)
	until := time.Unix(2_000_000_000, 0)
	root, lapsing, extra := oldStore(t, dir, src, until, 150)
	checkMigrated(t, dir, src, root, lapsing, until, extra)
}

// A migration stopped in the middle (here after the second step's blocks
// are in flatfs and before leveldb lets go of them, as a crash there
// would leave it) fails the open and loses nothing: the next open carries
// on and ends with every block once and every pin.
func TestStoreMigrationResumes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blocks")
	src := testTree(t)
	until := time.Unix(2_000_000_000, 0)
	root, lapsing, extra := oldStore(t, dir, src, until, 150)
	total := oldBlocksLeft(t, dir)
	crash := errors.New("crash")
	migrateHook = func(moved int) error {
		if moved >= migrateBatch {
			return crash
		}
		return nil
	}
	_, err := OpenStore(dir, 1<<30)
	migrateHook = nil
	if !errors.Is(err, crash) {
		t.Fatalf("open with a migration stopped: %v", err)
	}
	left := oldBlocksLeft(t, dir)
	if left != total-migrateBatch {
		t.Fatalf("%d of %d blocks left in leveldb after one step of %d", left, total, migrateBatch)
	}
	checkMigrated(t, dir, src, root, lapsing, until, extra)
}

// killChildEnv makes the test binary the writer that
// TestStoreKeepsAcknowledgedAfterKill kills.
const killChildEnv = "GLEANER_STORE_KILL_CHILD"

// A writer killed (SIGKILL) in the middle of writing leaves a store that
// opens, holds every block and pin whose write had returned, and no torn
// block: every file on disk hashes to its name. The count is taken again
// from the files, since no clean Close left one. (A kill tests the
// process dying; the files' fsyncs, which this cannot test, are what
// carry the same through a power cut.)
func TestStoreKeepsAcknowledgedAfterKill(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := filepath.Join(t.TempDir(), "blocks")
	cmd := exec.Command(os.Args[0], "-test.run=^TestStoreKeepsAcknowledgedAfterKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked, pins []cid.Cid
	sc := bufio.NewScanner(out)
	batches := 0
	// Kill after a number of acknowledged batches that varies from run to
	// run, so that the kill lands at different points of a write.
	killAt := 20 + rand.IntN(20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		c, err := cid.Decode(f[1])
		if err != nil {
			continue
		}
		switch f[0] {
		case "block":
			acked = append(acked, c)
		case "pin":
			pins = append(pins, c)
		case "batch":
			batches++
		}
		if batches == killAt {
			break
		}
	}
	// A little later, into the writes after the last one counted.
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	cmd.Process.Kill()
	cmd.Wait()
	if batches < killAt {
		t.Fatalf("the writer stopped after %d batches", batches)
	}

	s := openStore(t, dir, 1<<40)
	defer s.Close()
	n, bytes := sumBlocks(t, s)
	for _, c := range acked {
		if !has(t, s, c) {
			t.Fatalf("acknowledged block %s lost at the kill", c)
		}
	}
	for _, c := range pins {
		if !pinned(t, s, c) {
			t.Fatalf("acknowledged pin %s lost at the kill", c)
		}
	}
	if s.Used() != bytes {
		t.Fatalf("used %d after the kill, the %d blocks sum to %d", s.Used(), n, bytes)
	}
	t.Logf("%d blocks acknowledged, %d in the store after the kill", len(acked), n)
}

// killChild writes batches of blocks and pins until it is killed, saying
// on stdout what each write that returned holds.
func killChild(t *testing.T, dir string) {
	ctx := context.Background()
	s, err := OpenStore(dir, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	pref := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: 0x12, MhLength: -1}
	for i := 0; ; i++ {
		var bs []blocks.Block
		for k := 0; k < 8; k++ {
			data := make([]byte, 1+rng.IntN(ChunkSize))
			for j := 0; j+8 <= len(data); j += 8 {
				v := rng.Uint64()
				for x := 0; x < 8; x++ {
					data[j+x] = byte(v >> (8 * x))
				}
			}
			c, err := pref.Sum(data)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := blocks.NewBlockWithCid(data, c)
			bs = append(bs, b)
		}
		if err := s.Blockstore().PutMany(ctx, bs); err != nil {
			t.Fatal(err)
		}
		var msg strings.Builder
		for _, b := range bs {
			fmt.Fprintf(&msg, "block %s\n", b.Cid())
		}
		if i%3 == 0 {
			if err := s.Pin(ctx, bs[0].Cid()); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&msg, "pin %s\n", bs[0].Cid())
		}
		fmt.Fprintf(&msg, "batch %s\n", bs[0].Cid())
		os.Stdout.WriteString(msg.String())
	}
}
