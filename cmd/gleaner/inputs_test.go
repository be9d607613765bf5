package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/testnet"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// TestJobInputsByPathAndByCID runs a job with two inputs: a directory on
// the renter's machine (src, relative to the spec file) and a dataset by
// CID that only a third node holds. The provider fetches both before the
// start and mounts them read-only; the job prints every file's sha256,
// which must be the originals', and finds it cannot write there.
func TestJobInputsByPathAndByCID(t *testing.T) {
	requireDocker(t)
	p := provider(t, "provider", "1xRTX4090")
	holder := newNode(t, "holder", "--bootstrap", p.d.addrs[0])
	sharedDir := filepath.Join(t.TempDir(), "dataset")
	shared := writeTree(t, sharedDir)
	r := holder.cli(t, "data", "add", "--public", sharedDir) // a third node's dataset: anyone may fetch it
	mustOK(t, r, "holder: data add")
	sharedCID := strings.TrimSpace(r.stdout)

	rn := startRenter(t, p)
	specDir := t.TempDir()
	local := map[string][]byte{"prompts.txt": []byte("one\ntwo\n"), "cfg/run.json": []byte(`{"lr": 0.1}`)}
	for rel, b := range local {
		f := filepath.Join(specDir, "local", rel)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := fmt.Sprintf("name: reads-inputs\nimage: %s\ncommand: [\"-read\", \"/in\", \"-lines\", \"1\"]\nresources: {gpus: 1}\n"+
		"tier: silver\nmax_price: 1.00\nduration: {max: 10m}\nallow_simulated: true\n"+
		"inputs:\n  - {src: ./local, path: /in/local}\n  - {cid: %s, path: /in/shared}\n", testnet.DemoImage, sharedCID)
	file := filepath.Join(specDir, "job.yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	var sub renting.JobRecord
	decodeJSON(t, rn.cli(t, "job", "submit", "--json", file), "job submit with inputs", &sub)
	j := rn.waitJob(t, sub.ID, 3*time.Minute, "the job ends", func(j renting.JobRecord) bool { return terminalState(j.State) }, p, holder, rn)
	if j.State != renting.StateCompleted {
		t.Fatalf("job %s: %s: %s\n%s", j.ID, j.State, j.Error, tails([]*rnode{p, holder, rn}))
	}
	if !strings.Contains(j.Spec, "cid: ") || strings.Contains(j.Spec, "src:") {
		t.Errorf("the stored spec still names a local path:\n%s", j.Spec)
	}
	logs := rn.cli(t, "job", "logs", j.ID)
	mustOK(t, logs, "job logs")
	for rel, b := range local {
		want(t, logs.stdout, fmt.Sprintf("input local/%s %x", rel, sha256.Sum256(b)))
	}
	for rel, b := range shared {
		want(t, logs.stdout, fmt.Sprintf("input shared/%s %x", rel, sha256.Sum256(b)))
	}
	want(t, logs.stdout, "input writable: no")

	// The provider keeps what it fetched, and serves it on.
	var ls node.DataListResult
	decodeJSON(t, p.cli(t, "data", "ls", "--json"), "provider: data ls", &ls)
	if !hasPin(ls, sharedCID) {
		t.Errorf("provider's pins %+v lack the fetched input %s", ls.Pins, sharedCID)
	}
}

// TestJobInputNobodyServes: an input whose CID no node holds fails before
// the start, is not charged, and says so.
func TestJobInputNobodyServes(t *testing.T) {
	requireDocker(t)
	p := newNode(t, "provider", "--simulate-gpus", "1xRTX4090")
	setConfig(t, p, "input_fetch_timeout_s = 1200", "input_fetch_timeout_s = 5")
	mustOK(t, p.cli(t, "offer", "set", "--region", "eu/DE", "--price.silver", "0.50", "--price.bronze", "0.50"), "offer set")
	rn := startRenter(t, p)
	spec := fmt.Sprintf("name: no-input\nimage: %s\nresources: {gpus: 1}\ntier: silver\nmax_price: 1.00\n"+
		"duration: {max: 10m}\nallow_simulated: true\ninputs: [{cid: %s, path: /in}]\n", testnet.DemoImage, nobodyCID(t))
	id := rn.submit(t, spec, "")
	// With its only provider left out, the job has no match; with more,
	// it fails once two could not fetch. Either way it ends uncharged and
	// says why.
	j := rn.waitJob(t, id, 2*time.Minute, "the job ends", func(j renting.JobRecord) bool {
		return terminalState(j.State) || j.State == renting.StateNoMatch
	}, p, rn)
	if j.State == renting.StateCompleted || !strings.Contains(j.Error, "inputs could not be fetched") || j.Charged != nil && *j.Charged != 0 {
		t.Fatalf("job %s: state %s, charged %v, error %q", id, j.State, j.Charged, j.Error)
	}
}

func want(t *testing.T, out, line string) {
	t.Helper()
	if !strings.Contains(out, line+"\n") {
		t.Errorf("output lacks %q:\n%s", line, out)
	}
}

func hasPin(ls node.DataListResult, c string) bool {
	for _, p := range ls.Pins {
		if p.CID == c {
			return true
		}
	}
	return false
}

// setConfig replaces a line of n's config.toml and restarts its daemon
// on it.
func setConfig(t *testing.T, n *rnode, old, new string) {
	t.Helper()
	path := filepath.Join(n.repo, repo.ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), old) {
		t.Fatalf("%s lacks %q (%v)", path, old, err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	n.restart(t, syscall.SIGTERM)
}

// nobodyCID is a CID of bytes no node holds.
func nobodyCID(t *testing.T) string {
	t.Helper()
	mh, err := multihash.Sum([]byte("no node holds these bytes"), multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	return cid.NewCidV1(cid.Raw, mh).String()
}

// TestPlacementPrefersTheDataHolder: two providers at the same price, one
// holding the job's input. Its offer lists the dataset, `market offers
// 'dataset=CID'` finds it alone, and the auction awards the job to it.
func TestPlacementPrefersTheDataHolder(t *testing.T) {
	requireDocker(t)
	plain := provider(t, "plain", "1xRTX4090")
	holder := provider(t, "holder", "1xRTX4090", "--bootstrap", plain.d.addrs[0])
	dir := filepath.Join(t.TempDir(), "dataset")
	writeTree(t, dir)
	r := holder.cli(t, "data", "add", "--public", dir) // only public data is listed in an offer
	mustOK(t, r, "holder: data add")
	ds := strings.TrimSpace(r.stdout)
	rn := startRenter(t, plain, holder)

	var found node.MarketOffersResult
	waitUntil(t, 30*time.Second, "the holder's offer lists the dataset", func() bool {
		r := rn.cli(t, "market", "offers", "dataset="+ds, "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &found) == nil && len(found.Offers) > 0
	}, plain, holder, rn)
	if len(found.Offers) != 1 || found.Offers[0].Provider != holder.d.peerID {
		t.Fatalf("dataset=%s finds %d offers, want only the holder's", ds, len(found.Offers))
	}
	spec := fmt.Sprintf("name: near-data\nimage: %s\ncommand: [\"-read\", \"/in\", \"-lines\", \"1\"]\nresources: {gpus: 1}\n"+
		"tier: silver\nmax_price: 1.00\nduration: {max: 10m}\nallow_simulated: true\ninputs: [{cid: %s, path: /in}]\n", testnet.DemoImage, ds)
	id := rn.submit(t, spec, "")
	j := rn.waitJob(t, id, 3*time.Minute, "the job ends", func(j renting.JobRecord) bool { return terminalState(j.State) }, plain, holder, rn)
	if j.State != renting.StateCompleted || j.Provider != holder.d.peerID {
		t.Fatalf("job %s: %s on %s (holder %s, plain %s): %s", id, j.State, j.Provider, holder.d.peerID, plain.d.peerID, j.Error)
	}
	// Not a coin toss: the ranking credited the holder's cache, and only it.
	var ex renter.Explain
	decodeJSON(t, rn.cli(t, "job", "explain", id, "--json"), "job explain", &ex)
	loc := map[string]float64{}
	for _, r := range ex.Ranked {
		loc[r.Bid.Provider] = r.Parts.Locality
	}
	if loc[holder.d.peerID] != 1 || loc[plain.d.peerID] != 0 || len(ex.Ranked) != 2 {
		t.Errorf("locality in the ranking: %v, want 1 for the holder and 0 for the other", loc)
	}
}
