package providing

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/data/datatest"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// Bounded inputs and outputs (issue 34), on the provider over a real
// block store: the renter's DAGs are put in it beforehand, as if they had
// been fetched, and the fake fetch bounds their distinct bytes as the
// exchange's does (data.FetchWithin, tested against real peers in
// node/data). What is tested here is the provider's use of the bounds:
// the job's limit, the free disk, the refusal before any volume is
// written, the fetch's share of the lease, the outputs' max_size.

// storeData is Data over a real data.Store whose blocks are all there.
type storeData struct {
	s *data.Store
	// hold, when set, keeps every Fetch waiting for it (or its context):
	// a fetch from peers that do not answer. Made in the test's bubble.
	hold chan struct{}

	mu      sync.Mutex
	fetched []cid.Cid
}

func newStoreData(t *testing.T) *storeData {
	t.Helper()
	s, err := data.OpenStore(filepath.Join(t.TempDir(), "blocks"), 4<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &storeData{s: s}
}

func (d *storeData) Fetch(ctx context.Context, c cid.Cid, max int64) (int64, error) {
	d.mu.Lock()
	d.fetched = append(d.fetched, c)
	d.mu.Unlock()
	if d.hold != nil {
		select {
		case <-d.hold:
		case <-ctx.Done():
			return 0, fmt.Errorf("fetch %s: block %s: %w: %w", c, c, data.ErrNotFound, ctx.Err())
		}
	}
	// The distinct blocks' bytes, as a fetch counts them.
	seen := map[string]bool{}
	var unique int64
	err := merkledag.Walk(ctx, merkledag.GetLinksDirect(d.s.DAG()), c, func(k cid.Cid) bool {
		if seen[k.KeyString()] {
			return false
		}
		seen[k.KeyString()] = true
		n, _ := d.s.Blockstore().GetSize(ctx, k)
		unique += int64(n)
		return true
	})
	if err != nil {
		return unique, err
	}
	if unique > max {
		return unique, fmt.Errorf("fetch %s: %w", c, &data.SizeError{Root: c, Limit: max, Bytes: unique})
	}
	return unique, d.s.Pin(ctx, c)
}

func (d *storeData) Expand(ctx context.Context, c cid.Cid, max int64) (data.DAGSize, error) {
	return d.s.Expand(ctx, c, max)
}
func (d *storeData) Pinned(ctx context.Context, c cid.Cid) (bool, error) { return d.s.Pinned(ctx, c) }
func (d *storeData) Unpin(ctx context.Context, c cid.Cid) error          { return d.s.Unpin(ctx, c) }
func (d *storeData) Tar(ctx context.Context, c cid.Cid, w io.Writer, max int64) error {
	return data.WriteTar(ctx, d.s.DAG(), c, w, data.ExportLimits{MaxBytes: max, MaxEntries: data.MaxEntries})
}
func (d *storeData) KeepOutputs(ctx context.Context, r io.Reader, until time.Time, _ string, max int64) (cid.Cid, []string, error) {
	res, err := d.s.AddTarUntil(ctx, r, data.ExportLimits{MaxBytes: max, MaxEntries: data.MaxEntries}, until)
	return res.Root, res.Skipped, err
}

func (d *storeData) pinned(t *testing.T, c cid.Cid) bool {
	t.Helper()
	ok, err := d.s.Pinned(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// file puts a file of size random bytes in the store, wrapped in a
// folder as a job's input is, and returns the folder's CID.
func (d *storeData) file(t *testing.T, seed uint64, size int) cid.Cid {
	t.Helper()
	ctx := context.Background()
	var leaves []ipld.Node
	var names []string
	for off := 0; off < size; off += data.ChunkSize {
		n, err := datatest.Leaf(ctx, d.s.DAG(), seed<<32+uint64(off), min(data.ChunkSize, size-off))
		if err != nil {
			t.Fatal(err)
		}
		leaves, names = append(leaves, n), append(names, fmt.Sprintf("part%04d", off/data.ChunkSize))
	}
	dir, err := datatest.Folder(ctx, d.s.DAG(), names, leaves)
	if err != nil {
		t.Fatal(err)
	}
	return dir.Cid()
}

func (d *storeData) bomb(t *testing.T, seed uint64) cid.Cid {
	t.Helper()
	c, err := datatest.RepeatedFolder(context.Background(), d.s.DAG(), seed, 2000, data.ChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// inputSpec is a one-GPU job of duration max that reads the inputs at
// /in/0, /in/1, ...
func inputSpec(name, duration string, inputs ...cid.Cid) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nimage: example.org/job:1\ncommand: [\"run\"]\nresources: {gpus: 1}\n"+
		"tier: silver\nmax_price: 1.00\nduration: {max: %s}\nallow_simulated: true\nretry: {max_reauctions: 0}\ninputs:\n", name, duration)
	for i, c := range inputs {
		fmt.Fprintf(&b, "  - {cid: %s, path: /in/%d}\n", c, i)
	}
	return []byte(b.String())
}

func withData(d Data, maxInput int64) func(*Config) {
	return func(c *Config) { c.Data, c.MaxJobInput = d, maxInput }
}

// notStarted waits for the job's not-started error, which must carry the
// inputs code and say each of want, and checks that no container was
// made: nothing was written into a volume.
func notStarted(t *testing.T, r *rig, f *follower, want ...string) wire.Event {
	t.Helper()
	ev := f.until(t, "the refusal", isType(wire.EventError))
	if ev.Status != wire.StatusNotStarted || ev.Code != wire.CodeInputs || !strings.HasPrefix(ev.Error, InputsFailed) {
		t.Fatalf("event %+v, want not-started with code %q", ev, wire.CodeInputs)
	}
	t.Logf("refused: %s", ev.Error)
	for _, w := range want {
		if !strings.Contains(ev.Error, w) {
			t.Errorf("the refusal %q does not say %q", ev.Error, w)
		}
	}
	synctest.Wait()
	select {
	case j := <-r.exec.started:
		t.Fatalf("the executor started %s, with its %d input volumes", j.spec.JobID, len(j.spec.Inputs))
	default:
	}
	return ev
}

// The input bomb, twice: each is two blocks in the store and 500 MiB
// once written. Under a limit of 600 MiB the first passes and the second
// does not: the job is refused naming data.max_job_input_gib, before the
// executor writes any volume, and both inputs are unpinned again.
func TestInputBombTwiceIsRefusedByTheJobLimit(t *testing.T) {
	d := newStoreData(t)
	one, two := d.bomb(t, 1), d.bomb(t, 2)
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, withData(d, 600<<20))
		defer r.stop()
		rt := r.renter()
		sp := inputSpec("bomb", "30m", one, two)
		f := rt.start(rt.lease("job-1", sp), sp)
		defer f.close()
		notStarted(t, r, f, "inputs[1] "+two.String(), "data.max_job_input_gib (600MiB)", "every block as often as it is linked")
		if d.pinned(t, one) || d.pinned(t, two) {
			t.Error("the inputs of the refused job are still pinned")
		}
		if s := r.settlements(); len(s) != 1 || s[0].Charged == nil || *s[0].Charged != 0 {
			t.Fatalf("settlements %+v, want one charging nothing", s)
		}
	})
}

// Within the limit, the same job starts, its inputs' volumes bounded by
// what their blocks measure, not by what their roots claim.
func TestInputsWithinTheLimitStart(t *testing.T) {
	d := newStoreData(t)
	one, two := d.bomb(t, 1), d.file(t, 3, 3*data.ChunkSize)
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 1, withData(d, 1<<30))
		defer r.stop()
		rt := r.renter()
		sp := inputSpec("fits", "30m", one, two)
		f := rt.start(rt.lease("job-1", sp), sp)
		defer f.close()
		job := <-r.exec.started
		if len(job.spec.Inputs) != 2 || job.spec.Inputs[0].Bytes < 2000*data.ChunkSize || job.spec.Inputs[1].Bytes < 3*data.ChunkSize ||
			job.spec.Inputs[1].Bytes > 3*data.ChunkSize+4096 {
			t.Fatalf("inputs %v", job.spec.Inputs)
		}
		// The volume's stream is what the DAG writes out, within its bound.
		var tb bytes.Buffer
		if err := job.spec.Inputs[1].Tar(context.Background(), &tb); err != nil {
			t.Fatal(err)
		}
		if !d.pinned(t, one) || !d.pinned(t, two) {
			t.Error("the inputs of a job that started are not kept")
		}
		job.exit(0, false)
		f.until(t, "the exit", isType(wire.EventExit))
	})
}

// A provider whose disk is nearly full refuses a job whose inputs would
// not fit above its reserve: where the volumes go (asked after the fetch,
// which may have filled the same disk), or where the store is (asked
// before the fetch, which it bounds).
func TestNearlyFullDiskRefusesInputs(t *testing.T) {
	d := newStoreData(t)
	in := d.file(t, 4, 16<<20)
	for _, tc := range []struct {
		name           string
		store, vols    int64
		want           string
		fetchedAtLeast int
	}{
		{"volumes", 1 << 30, 20 << 20, "they take 16.0MiB once written, and this provider's disk has 20MiB free where the input volumes go", 1},
		{"store", 20 << 20, 1 << 30, "does not fit this provider's disk: 20MiB free where its block store is", 1},
		{"store already full", 8 << 20, 1 << 30, "does not fit this provider's disk: 8MiB free where its block store is", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.fetched = nil
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, 1, withData(d, 1<<30), func(c *Config) {
					c.DiskReserve = 8 << 20
					c.FreeDisk = func(context.Context) (int64, int64, error) { return tc.store, tc.vols, nil }
				})
				defer r.stop()
				rt := r.renter()
				sp := inputSpec("full", "30m", in)
				f := rt.start(rt.lease("job-1", sp), sp)
				defer f.close()
				notStarted(t, r, f, tc.want, "data.disk_reserve_gib keeps 8MiB free")
				if len(d.fetched) < tc.fetchedAtLeast || tc.fetchedAtLeast == 0 && len(d.fetched) != 0 {
					t.Errorf("%d fetches, want at least %d", len(d.fetched), tc.fetchedAtLeast)
				}
				if d.pinned(t, in) {
					t.Error("the input of the refused job is still pinned")
				}
			})
		})
	}
}

// Deep and wide inputs end with clear errors.
func TestDeepAndWideInputsAreRefused(t *testing.T) {
	d := newStoreData(t)
	ctx := context.Background()
	b := ipld.NewBatch(ctx, d.s.DAG())
	deep, err := datatest.DeepFolder(ctx, b, 3000)
	if err != nil {
		t.Fatal(err)
	}
	wide, err := datatest.WideFolder(ctx, b, 1100, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   cid.Cid
		want string
	}{
		{deep, "folder deeper than 64 levels"},
		{wide, fmt.Sprintf("more than %d entries", data.MaxEntries)},
	} {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, withData(d, 1<<40))
			defer r.stop()
			rt := r.renter()
			sp := inputSpec("odd", "30m", tc.in)
			f := rt.start(rt.lease("job-1", sp), sp)
			defer f.close()
			notStarted(t, r, f, "inputs[0] "+tc.in.String(), tc.want)
		})
	}
}

// Fetching is part of the deal: a fetch that does not end (peers that
// never answer) ends at a quarter of the lease, not at the owner's 20
// minutes, and says why.
func TestInputFetchEndsWithinItsShareOfTheLease(t *testing.T) {
	d := newStoreData(t)
	in := d.file(t, 5, 1000)
	synctest.Test(t, func(t *testing.T) {
		d.hold = make(chan struct{}) // never closed; made in the bubble, so that waiting on it lets time pass
		r := newRig(t, 1, withData(d, 1<<30))
		defer r.stop()
		rt := r.renter()
		sp := inputSpec("slow", "30m", in)
		began := time.Now()
		f := rt.start(rt.lease("job-1", sp), sp)
		defer f.close()
		ev := f.until(t, "the error", isType(wire.EventError))
		took := time.Since(began)
		if ev.Code != wire.CodeInputs || !strings.Contains(ev.Error, "longer than its share of the lease") {
			t.Fatalf("event %+v", ev)
		}
		if took < 7*time.Minute || took > 8*time.Minute {
			t.Errorf("the fetch ended after %v, want a quarter of the 30-minute lease", took)
		}
	})
}

// A provider restarted while it fetched a job's inputs holds the lease
// again (Restore), and the renter starts it again: the inputs are
// fetched and measured again from the start, over what the store kept,
// so the limit holds as before.
func TestInputLimitHoldsAcrossARestartMidFetch(t *testing.T) {
	d := newStoreData(t)
	one, two := d.bomb(t, 1), d.bomb(t, 2)
	synctest.Test(t, func(t *testing.T) {
		d.hold = make(chan struct{})
		first := newRig(t, 1, withData(d, 600<<20))
		rt := first.renter()
		sp := inputSpec("bomb", "30m", one, two)
		raw := rt.lease("job-1", sp)
		f := rt.start(raw, sp)
		f.until(t, "fetching", isStatus(wire.StatusFetching))
		synctest.Wait() // the fetch waits on the peers
		first.stop()    // the node stops mid-fetch
		synctest.Wait()
		f.close()
		if st, _ := first.pj.LeaseState("job-1"); st != LeaseStarted {
			t.Fatalf("the lease stopped mid-fetch is %q, want %q (held again at the next start)", st, LeaseStarted)
		}
		close(d.hold) // the peers answer from now on

		again := newRigOver(t, 1, first.key, first.store, first.exec, withData(d, 600<<20))
		defer again.stop()
		rt.r = again
		if restored, err := again.pj.Restore(time.Now()); err != nil || len(restored.Kept) != 1 {
			t.Fatalf("restored %+v, %v; want the lease kept", restored, err)
		}
		f = rt.start(raw, sp)
		defer f.close()
		notStarted(t, again, f, "inputs[1] "+two.String(), "data.max_job_input_gib (600MiB)")
	})
}

// outputsTar is a tar stream of one file of size bytes.
func outputsTar(t *testing.T, size int) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./big.bin", Size: int64(size), Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(bytes.Repeat([]byte{7}, size)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A job's outputs over its spec's max_size are not published: the exit
// names no CID, and says why with its code, which the renter records.
// Within it they are kept.
func TestOutputsOverMaxSizeAreNotKept(t *testing.T) {
	d := newStoreData(t)
	for _, tc := range []struct {
		size int
		kept bool
	}{{3 << 20, false}, {1 << 20, true}} {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, 1, withData(d, 1<<30))
			defer r.stop()
			r.exec.outputs = outputsTar(t, tc.size)
			rt := r.renter()
			sp := append(spec("outs", auction.Silver), "outputs: {path: /outputs, max_size: 1MiB}\n"...)
			f := rt.start(rt.lease("job-1", sp), sp)
			defer f.close()
			job := <-r.exec.started
			job.exit(0, false)
			ev := f.until(t, "the exit", isType(wire.EventExit))
			if tc.kept {
				if ev.Outputs == "" || ev.Code != "" || ev.Error != "" {
					t.Fatalf("exit %+v, want the outputs kept", ev)
				}
				return
			}
			if ev.Outputs != "" || ev.Code != wire.CodeOutputs || !strings.HasPrefix(ev.Error, OutputsNotKept) ||
				!strings.Contains(ev.Error, "outputs.max_size 1MiB") {
				t.Fatalf("exit %+v, want no outputs, code %q and max_size named", ev, wire.CodeOutputs)
			}
			if ev.Status != wire.StatusCompleted {
				t.Errorf("status %q: the job itself completed", ev.Status)
			}
		})
	}
}
