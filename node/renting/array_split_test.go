package renting

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

const (
	splitWhole = "bafkreihfsphazrk2ilejpekyltjeh5k4yvwgjuwg26ueafohqioeo3sdca" // the input as submitted
	splitOther = "bafkqaaa"                                                    // an input the split leaves alone
)

var splitSpecYAML = `name: emb
image: embedder:1
resources: {gpus: 1}
tier: bronze
max_price: 0.8
duration: {max: 1h}
inputs: [{cid: ` + splitOther + `, path: /w}, {cid: ` + splitWhole + `, path: /data}]
array: {shards: 3, max_parallel: 3, split: {input: /data}}
`

// fakeSplit stands in for the node's store: shard i's directory is a CID
// of its own, and it counts how often it was asked.
type fakeSplit struct {
	mu    sync.Mutex
	calls int
	err   error
}

func shardDir(i int) string {
	h, _ := multihash.Sum([]byte(fmt.Sprintf("shard %d", i)), multihash.SHA2_256, -1)
	return cid.NewCidV1(cid.DagProtobuf, h).String()
}

func (f *fakeSplit) SplitInput(_ context.Context, root cid.Cid, shards int) ([]ShardInput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if root.String() != splitWhole {
		return nil, fmt.Errorf("asked to split %s", root)
	}
	out := make([]ShardInput, shards)
	for i := range out {
		out[i] = ShardInput{CID: shardDir(i), Files: i + 1}
	}
	return out, nil
}

// specStarts records each shard job's spec as it is started.
type specStarts struct {
	mu    sync.Mutex
	specs map[string]*auction.JobSpec
}

func (s *specStarts) start(id string, spec *auction.JobSpec, _ []byte, _ map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.specs[id] = spec
}

func (s *specStarts) get(id string) *auction.JobSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.specs[id]
}

func splitJobs(t *testing.T, st *store.Store, split InputSplitter) (*Jobs, *specStarts, context.CancelFunc) {
	t.Helper()
	r, _, cancel := arrayJobs(t, st)
	s := &specStarts{specs: map[string]*auction.JobSpec{}}
	r.runShard, r.split = s.start, split
	return r, s, cancel
}

// checkShardInputs: shard i's spec names its own directory in the split
// input's place and leaves the other input as it was.
func checkShardInputs(t *testing.T, spec *auction.JobSpec, i int) {
	t.Helper()
	if spec == nil {
		t.Fatalf("shard %d not started", i)
	}
	want := []auction.Input{{CID: splitOther, Path: "/w"}, {CID: shardDir(i), Path: "/data"}}
	if len(spec.Inputs) != 2 || spec.Inputs[0] != want[0] || spec.Inputs[1] != want[1] {
		t.Fatalf("shard %d's inputs %+v, want %+v", i, spec.Inputs, want)
	}
}

// A split is dealt once, at submit; each shard's job names its own
// directory, in its spec and in the job's record; a restarted node gives
// a shard placed again the same directory without dealing again.
func TestArraySplitGivesEachShardItsDirectory(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	split := &fakeSplit{}
	r, starts, stop := splitJobs(t, st, split)
	rec, err := r.Submit([]byte(splitSpecYAML), nil, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := rec.ID
	for i := range 3 {
		sj := renter.ShardJob(id, i, 1)
		waitFor(t, sj, func() bool { return starts.get(sj) != nil })
		checkShardInputs(t, starts.get(sj), i)
		j, _ := r.Get(sj)
		back, err := auction.ParseJobSpec([]byte(j.Spec))
		if err != nil {
			t.Fatal(err)
		}
		checkShardInputs(t, back, i)
	}
	if v, _ := r.Get(id); v.ArrayView.ShardJobs[2].Input != shardDir(2) || v.ArrayView.ShardJobs[2].Files != 3 {
		t.Fatalf("shard 2's view %+v", v.ArrayView.ShardJobs[2])
	}

	// Shard 1 fails while the node is stopped; the restarted node places
	// it again with the directory its record kept.
	stop()
	endShard(r, renter.ShardJob(id, 1, 1), StateFailed, "pA", 3)
	r2, starts2, stop2 := splitJobs(t, st, split)
	defer stop2()
	r2.resumeArrays()
	again := renter.ShardJob(id, 1, 2)
	waitFor(t, again, func() bool { return starts2.get(again) != nil })
	checkShardInputs(t, starts2.get(again), 1)
	if split.calls != 1 {
		t.Fatalf("the input was dealt %d times, want once", split.calls)
	}
}

// A split that cannot be made refuses the submit with the field and the
// reason, before any array or shard exists.
func TestArraySplitRefusedBeforeAnythingIsBought(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range []struct {
		split    InputSplitter
		badSpec  bool
		contains string
	}{
		{&fakeSplit{err: fmt.Errorf("%w: it holds 2 files, fewer than array.shards (3)", ErrSplitRefused)}, true, "array.split: input /data: cannot be split: it holds 2 files"},
		{&fakeSplit{err: errors.New("disk on fire")}, false, "array.split: input /data: disk on fire"},
		{nil, false, "array.split: input /data: this node has no data store"},
	} {
		r, starts, stop := splitJobs(t, st, c.split)
		_, err := r.Submit([]byte(splitSpecYAML), nil, SubmitOptions{})
		stop()
		if err == nil || !strings.Contains(err.Error(), c.contains) || errors.Is(err, auction.ErrBadJobSpec) != c.badSpec {
			t.Errorf("got %v, want %q (a bad spec: %v)", err, c.contains, c.badSpec)
		}
		if len(r.Arrays()) != 0 || len(starts.specs) != 0 {
			t.Errorf("%q: an array was recorded or started", c.contains)
		}
	}
}
