package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/ipfs/go-cid"
)

// A renter daemon restarted (stopped and started again on its repo, as
// an owner's daemon restarts) under a running lease still serves that
// lease's provider the job's private inputs, and still refuses anyone
// else. The grant is in node.db: the stop leaves it there (it ends with
// the lease, not with the process), so the provider is served from the
// moment the node is up again, before it has re-attached to the job.
func TestARestartedRenterStillServesItsProviderTheInputs(t *testing.T) {
	waitsOnItsOwnJobs(t)
	r := newHostileRig(t, Options{}, nil)
	rn := renterOf(t, r.ctx, r.prov)
	src := filepath.Join(t.TempDir(), "in")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "secret.bin"), noiseBytes(3*data.ChunkSize+17), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := rn.resolveInputs(r.ctx, []byte(linesSpec("inputs", "40s", 2)+"inputs:\n  - {src: "+src+", path: /in}\n"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := auction.ParseJobSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	in, err := cid.Decode(parsed.Inputs[0].CID)
	if err != nil {
		t.Fatal(err)
	}
	j, err := rn.renterJobs.Submit(spec, nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, j.ID, time.Minute, "running", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning })
	provID := r.prov.Host().ID()

	// Stopped: node.db, as the next start reads it, still grants the
	// provider the inputs (a grant in memory only would be gone).
	rn = restartNodeAfter(t, r.ctx, rn, func() {
		st, err := store.Open(filepath.Join(rn.repo.Dir, repo.StoreFile))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var rec accessRecord
		if err := st.Get(store.BucketAccess, grantKey(provID, in), &rec); err != nil {
			t.Errorf("the stopped renter's node.db does not grant the provider the inputs: %v", err)
		} else if !rec.Until.After(time.Now()) {
			t.Errorf("the recorded grant ends at %s, before the lease", rec.Until)
		}
	})
	if !rn.access.Allow(provID, in) {
		t.Error("the restarted renter refuses the provider the inputs of its running lease")
	}

	// The provider fetches them again from the restarted renter, over
	// the network, as it does a job's inputs (its copy dropped first).
	if err := r.prov.data.Unpin(r.ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := r.prov.data.GC(r.ctx); err != nil {
		t.Fatal(err)
	}
	if has, _ := r.prov.data.Blockstore().Has(r.ctx, in); has {
		t.Fatal("the provider still holds the input's root after gc")
	}
	if err := r.prov.Host().LibP2P().Connect(r.ctx, addrInfo(rn.Host())); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	if n, err := (nodeData{r.prov}).Fetch(fctx, in, 1<<30); err != nil || n == 0 {
		t.Fatalf("the provider's fetch of the inputs from the restarted renter: %d bytes, %v", n, err)
	}

	// A stranger is refused at once, told the data is private.
	stranger := startTestNode(t, r.ctx, "", Options{})
	if err := stranger.Host().LibP2P().Connect(r.ctx, addrInfo(rn.Host())); err != nil {
		t.Fatal(err)
	}
	_, err = stranger.fetchData(r.ctx, in, 20*time.Second, false, data.FetchLimits{}, rn.Host().ID())
	var rerr *rpc.Error
	if !errors.As(err, &rerr) || rerr.Code != CodeDataPrivate || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a stranger's fetch of the inputs: %v, want code %d saying it is refused", err, CodeDataPrivate)
	}
	if has, _ := stranger.data.Blockstore().Has(r.ctx, in); has {
		t.Error("the stranger got the root block of the private inputs")
	}
}

// noiseBytes is n bytes that do not repeat within a block.
func noiseBytes(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
