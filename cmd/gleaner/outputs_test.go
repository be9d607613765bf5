package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
	mdtest "github.com/ipfs/boxo/ipld/merkledag/test"
)

// TestJobOutputsFetched: a job writes its results to its outputs volume;
// the provider seals them to the renter when it exits and names the
// ciphertext's CID (not the CID `data add` gives for the files: the CID
// on the ledger reveals nothing); the renter fetches them with `job
// fetch`, gets exactly the files written, and fetches them again after a
// crash of its daemon. A third node is refused them. The provider keeps
// them pinned, private, until the retention window ends.
func TestJobOutputsFetched(t *testing.T) {
	requireDocker(t)
	p := provider(t, "provider", "1xRTX4090")
	rn := startRenter(t, p)
	spec := fmt.Sprintf("name: writes-outputs\nimage: %s\ncommand: [\"-write\", \"/outputs\", \"-lines\", \"1\"]\nresources: {gpus: 1}\n"+
		"tier: silver\nmax_price: 1.00\nduration: {max: 10m}\nallow_simulated: true\noutputs: {path: /outputs, max_size: 16MiB}\n", testnet.DemoImage)
	id := rn.submit(t, spec, "")
	j := rn.waitJob(t, id, 3*time.Minute, "the job ends", func(j renting.JobRecord) bool { return terminalState(j.State) }, p, rn)
	if j.State != renting.StateCompleted || j.Outputs == "" {
		t.Fatalf("job %s: %s, outputs %q, error %q\n%s", id, j.State, j.Outputs, j.Error, tails([]*rnode{p, rn}))
	}
	// Each transition is a line in the daemons' logs.
	if !strings.Contains(rn.tail(), `msg="job state" part=renter-jobs job=`+id+` from=running to=completed`) {
		t.Errorf("the renter's log has no line for the job's completion:\n%s", rn.tail())
	}
	if !strings.Contains(p.tail(), `msg="lease state"`) || !strings.Contains(p.tail(), `from=launched to=ended`) {
		t.Errorf("the provider's log has no lease transitions:\n%s", p.tail())
	}
	if plain := resultsCID(t); j.Outputs == plain {
		t.Errorf("outputs CID %s is the CID of the files the job wrote: they were not sealed", j.Outputs)
	}

	dir := filepath.Join(t.TempDir(), "results")
	var got node.DataFetchResult
	decodeJSON(t, rn.cli(t, "job", "fetch", "--json", id, dir), "job fetch", &got)
	if !got.Sealed || got.CID != j.Outputs {
		t.Errorf("job fetch = %+v, want the sealed outputs %s opened", got, j.Outputs)
	}
	checkTree(t, dir, demoimage.Results())

	// A stranger connected to the provider is refused them, at once.
	stranger := newNode(t, "stranger", "--bootstrap", p.d.addrs[0])
	began := time.Now()
	if r := stranger.cli(t, "data", "get", "--timeout", "60s", j.Outputs, filepath.Join(t.TempDir(), "stolen")); r.code == 0 || !strings.Contains(r.stderr, "refused") {
		t.Errorf("a stranger's data get of the outputs: exit %d, %q; want a refusal", r.code, r.stderr)
	}
	if took := time.Since(began); took > 40*time.Second {
		t.Errorf("the stranger's refusal took %s, not seconds", took)
	}

	rn.restart(t, syscall.SIGKILL)
	again := filepath.Join(t.TempDir(), "again")
	mustOK(t, rn.cli(t, "job", "fetch", id, again), "job fetch after the renter's crash")
	checkTree(t, again, demoimage.Results())

	var ls node.DataListResult
	decodeJSON(t, p.cli(t, "data", "ls", "--json"), "provider: data ls", &ls)
	if !hasPin(ls, j.Outputs) {
		t.Errorf("the provider does not keep the outputs %s: %+v", j.Outputs, ls.Pins)
	}
	for _, pin := range ls.Pins {
		if pin.Public {
			t.Errorf("the provider serves %s to anyone; a job's outputs and inputs are private", pin.CID)
		}
	}
	// A job without outputs says so.
	plain := rn.submit(t, demoSpec("plain", "silver", "0s", 1, 0), "")
	rn.waitJob(t, plain, 3*time.Minute, "the plain job ends", func(j renting.JobRecord) bool { return terminalState(j.State) }, p, rn)
	if r := rn.cli(t, "job", "fetch", plain, filepath.Join(t.TempDir(), "x")); r.code == 0 || !strings.Contains(r.stderr, "no outputs") {
		t.Errorf("job fetch of a job without outputs: exit %d, %q", r.code, r.stderr)
	}
}

// resultsCID is the CID `gleaner data add` gives for the demo job's
// results.
func resultsCID(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for rel, b := range demoimage.Results() {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := data.Import(context.Background(), mdtest.Mock(), dir, data.CIDv1)
	if err != nil {
		t.Fatal(err)
	}
	return c.String()
}
