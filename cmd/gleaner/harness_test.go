package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/testnet"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The CLI harness builds the real binary once and drives it against real
// daemons, as a user would from a shell.

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gleaner-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "gleaner")
	out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build gleaner: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

func gleaner(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), "GLEANER_REPO=")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return result{so.String(), se.String(), code}
}

func mustOK(t *testing.T, r result, what string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
	}
}

func initRepo(t *testing.T) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	mustOK(t, gleaner(t, "--repo", repo, "init", "--network", "local"), "init")
	return repo
}

// daemon is a running `gleaner daemon` child process.
type daemon struct {
	cmd    *exec.Cmd
	repo   string
	peerID string
	addrs  []string
	stderr *bytes.Buffer
	done   chan error
}

func startDaemon(t testing.TB, repo string, extra ...string) *daemon {
	t.Helper()
	args := append([]string{"--repo", repo, "daemon", "--json", "--mdns=false",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--rpc", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binPath, args...)
	d := &daemon{cmd: cmd, repo: repo, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = d.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.done
		d.done <- nil
	})
	var ready struct {
		PeerID string   `json:"peer_id"`
		Addrs  []string `json:"addrs"`
	}
	dec := make(chan error, 1)
	go func() { dec <- json.NewDecoder(bufio.NewReader(out)).Decode(&ready) }()
	select {
	case err := <-dec:
		if err != nil {
			t.Fatalf("daemon never became ready: %v\nstderr: %s", err, d.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("daemon not ready after 20 s\nstderr: %s", d.stderr)
	}
	d.peerID, d.addrs = ready.PeerID, ready.Addrs
	return d
}

// stop sends sig and returns the exit code and how long the exit took.
func (d *daemon) stop(t testing.TB, sig syscall.Signal) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	_ = d.cmd.Process.Signal(sig)
	select {
	case err := <-d.done:
		d.done <- err
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ee.Sys().(syscall.WaitStatus).Signaled() {
				code = -1
			}
		}
		return code, time.Since(start)
	case <-time.After(15 * time.Second):
		t.Fatalf("daemon did not exit within 15 s of %v\nstderr: %s", sig, d.stderr)
		return 0, 0
	}
}

func TestInitTwiceIsRefused(t *testing.T) {
	repo := initRepo(t)
	before, _ := os.ReadFile(filepath.Join(repo, "identity.key"))
	r := gleaner(t, "--repo", repo, "init")
	if r.code != 1 || !strings.Contains(r.stderr, "already exists") || !strings.Contains(r.stderr, "hint:") {
		t.Fatalf("second init: exit %d, stderr %q", r.code, r.stderr)
	}
	after, _ := os.ReadFile(filepath.Join(repo, "identity.key"))
	if !bytes.Equal(before, after) {
		t.Fatal("second init changed the identity")
	}
}

func TestClientWithoutDaemonSaysSo(t *testing.T) {
	repo := initRepo(t)
	r := gleaner(t, "--repo", repo, "id")
	if r.code != 1 || !strings.Contains(r.stderr, "no daemon is running") || !strings.Contains(r.stderr, "gleaner daemon") {
		t.Fatalf("id without daemon: exit %d, stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "goroutine") {
		t.Fatal("printed a stack trace")
	}
	r = gleaner(t, "--repo", filepath.Join(t.TempDir(), "none"), "peers")
	if r.code != 1 || !strings.Contains(r.stderr, "gleaner init") {
		t.Fatalf("peers without repo: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	repo := initRepo(t)
	for _, args := range [][]string{
		{"frobnicate"},
		{"--repo", repo, "connect"},
		{"--repo", repo, "ping", "a", "b"},
		{"--repo", repo, "daemon", "--log-level", "loud"},
		{"--repo", repo, "daemon", "--rpc", "0.0.0.0:0"},
		{"--repo", repo, "id", "--no-such-flag"},
		{"--repo", repo, "rpc", "node_ping", "{not json"},
		{"completion", "tcsh"},
		{"testnet", "up", "--nodes", "0"},
		{"testnet", "up", "--workloads", "batch,gpu"},
		{"testnet", "up", "--network", "Lab_1"},
	} {
		r := gleaner(t, args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "gleaner: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and a one-line error", args, r.code, r.stderr)
		}
	}
}

func TestOfferAndMarketFromTheCLI(t *testing.T) {
	prov, renter := initRepo(t), initRepo(t)
	p := startDaemon(t, prov, "--simulate-gpus", "2xRTX4090")
	startDaemon(t, renter, "--bootstrap", p.addrs[0])

	r := gleaner(t, "--repo", prov, "offer", "show")
	mustOK(t, r, "offer show")
	if !strings.Contains(r.stdout, "not offered yet") || !strings.Contains(r.stdout, "RTX4090 (simulated)") {
		t.Fatalf("offer show before set:\n%s", r.stdout)
	}
	r = gleaner(t, "--repo", prov, "offer", "set", "--price.bronze", "cheap")
	if r.code != 2 || !strings.Contains(r.stderr, "--price.bronze") {
		t.Fatalf("bad price: exit %d, stderr %q; want exit 2 naming the field", r.code, r.stderr)
	}
	mustOK(t, gleaner(t, "--repo", prov, "offer", "set", "--region", "eu/DE", "--price.bronze", "0.45",
		"--tz", "Europe/Berlin", "--weekly", "mon-sun 00:00-24:00"), "offer set")

	var res struct {
		Offers []struct {
			Provider  string           `json:"provider"`
			Simulated bool             `json:"simulated"`
			Prices    map[string]int64 `json:"prices"` // micro-credits per GPU-hour
		} `json:"offers"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = gleaner(t, "--repo", renter, "market", "offers", "gpu=RTX4090 price.bronze<=0.5", "--json")
		mustOK(t, r, "market offers")
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("market offers --json: %v\n%s", err, r.stdout)
		}
		if len(res.Offers) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(res.Offers) != 1 || res.Offers[0].Provider != p.peerID || !res.Offers[0].Simulated || res.Offers[0].Prices["bronze"] != 450_000 {
		t.Fatalf("renter's market: %+v", res.Offers)
	}
	r = gleaner(t, "--repo", renter, "market", "offers", "simulated=false", "--explain")
	mustOK(t, r, "market offers --explain")
	if !strings.Contains(r.stdout, "1 removed by simulated = false") {
		t.Fatalf("explain does not say which clause removed the simulated offer:\n%s", r.stdout)
	}
	r = gleaner(t, "--repo", renter, "market", "offers", "vram>>40")
	if r.code != 2 || !strings.Contains(r.stderr, "gleaner: ") {
		t.Fatalf("malformed query: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestJobSpecErrorsNameTheLine(t *testing.T) {
	repo := initRepo(t)
	startDaemon(t, repo)
	spec := filepath.Join(t.TempDir(), "bad.yaml")
	body := "name: x\nimage: busybox:1\nresources: {gpus: 0}\ntier: bronze\nmax_price: 1\nduration: {max: 1h}\n"
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := gleaner(t, "--repo", repo, "job", "run", spec)
	if r.code != 2 || !strings.Contains(r.stderr, "line 3") || !strings.Contains(r.stderr, "resources.gpus") {
		t.Fatalf("bad spec: exit %d, stderr %q; want exit 2 naming line 3 and resources.gpus", r.code, r.stderr)
	}
	r = gleaner(t, "--repo", repo, "job", "run", filepath.Join(t.TempDir(), "missing.yaml"))
	if r.code != 2 {
		t.Fatalf("missing spec file: exit %d, stderr %q", r.code, r.stderr)
	}
	// A valid spec with nobody selling: a clear no-match, never a hang.
	good := strings.Replace(body, "gpus: 0", "gpus: 1", 1)
	if err := os.WriteFile(spec, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	r = gleaner(t, "--repo", repo, "job", "run", spec)
	if r.code != 1 || !strings.Contains(r.stderr, "no provider") || !strings.Contains(r.stderr, "job explain") {
		t.Fatalf("no offers: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestRentAndAuditFromTheCLI drives a whole rental through the binary as a
// user would: a provider daemon sells a simulated GPU, a renter daemon runs
// `gleaner job run`, then the renter inspects the job, its ledger, its
// balance and the provider's reputation.
func TestRentAndAuditFromTheCLI(t *testing.T) {
	requireDocker(t)
	prov, renter := initRepo(t), initRepo(t)
	p := startDaemon(t, prov, "--simulate-gpus", "1xRTX4090")
	startDaemon(t, renter, "--bootstrap", p.addrs[0])
	mustOK(t, gleaner(t, "--repo", prov, "offer", "set", "--region", "eu/DE", "--price.silver", "0.50", "--price.bronze", "0.30"), "offer set")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(gleaner(t, "--repo", renter, "market", "offers").stdout, "RTX4090") {
		if time.Now().After(deadline) {
			t.Fatal("the renter never saw the offer")
		}
		time.Sleep(200 * time.Millisecond)
	}
	spec := filepath.Join(t.TempDir(), "job.yaml")
	body := "name: cli\nimage: " + testnet.DemoImage + "\ncommand: [\"-sleep\", \"300ms\"]\n" +
		"resources: {gpus: 1}\ntier: silver\nmax_price: 1\nduration: {max: 10m}\nallow_simulated: true\n"
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := gleaner(t, "--repo", renter, "job", "run", spec)
	mustOK(t, r, "job run")
	if !strings.Contains(r.stdout, "job finished") || !strings.Contains(r.stderr, "completed") || !strings.Contains(r.stderr, "SIMULATED") {
		t.Fatalf("job run output:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
	r = gleaner(t, "--repo", renter, "job", "ls", "--json")
	mustOK(t, r, "job ls")
	var jobs []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil || len(jobs) != 1 || jobs[0].State != "completed" {
		t.Fatalf("job ls: %s (%v)", r.stdout, err)
	}
	mustOK(t, gleaner(t, "--repo", renter, "job", "explain", jobs[0].ID), "job explain")
	r = gleaner(t, "--repo", renter, "ledger", "history")
	mustOK(t, r, "ledger history")
	if !strings.Contains(r.stdout, "lease") || !strings.Contains(r.stdout, "outcome") {
		t.Fatalf("renter's ledger history:\n%s", r.stdout)
	}
	mustOK(t, gleaner(t, "--repo", renter, "ledger", "balance"), "ledger balance")
	deadline = time.Now().Add(15 * time.Second)
	for {
		r = gleaner(t, "--repo", renter, "rep", "show", p.peerID)
		mustOK(t, r, "rep show")
		if strings.Contains(r.stdout, "score:      0.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider has no score after a paid, completed job:\n%s", r.stdout)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !strings.Contains(r.stdout, "claims:     1 GPU(s) (SIMULATED): RTX4090") {
		t.Fatalf("rep show does not show the provider's hardware claim:\n%s", r.stdout)
	}

	// Checking the work as a user would: the docs' canary pinned to the
	// provider, then a job on two providers whose outputs are compared.
	canary := "../../docs/examples/canary.yaml"
	if r = gleaner(t, "--repo", renter, "job", "run", "--provider", "not-a-peer", canary); r.code == 0 || !strings.Contains(r.stderr, "provider") {
		t.Fatalf("job run --provider not-a-peer: exit %d, %q", r.code, r.stderr)
	}
	r = gleaner(t, "--repo", renter, "job", "run", "--provider", p.peerID, canary)
	mustOK(t, r, "job run --provider (canary)")
	if !strings.Contains(r.stderr, "verified:  passed") || !strings.Contains(r.stderr, p.peerID) {
		t.Fatalf("canary run:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
	prov2 := initRepo(t)
	startDaemon(t, prov2, "--simulate-gpus", "1xRTX4090", "--bootstrap", p.addrs[0])
	mustOK(t, gleaner(t, "--repo", prov2, "offer", "set", "--region", "eu/DE", "--price.silver", "0.50"), "offer set (second provider)")
	deadline = time.Now().Add(10 * time.Second)
	for strings.Count(gleaner(t, "--repo", renter, "market", "offers").stdout, "RTX4090") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the renter never saw the second offer")
		}
		time.Sleep(200 * time.Millisecond)
	}
	twice := filepath.Join(t.TempDir(), "twice.yaml")
	body = strings.Replace(body, "name: cli", "name: twice", 1) + "verify: {replicas: 2}\n"
	body = strings.Replace(body, `["-sleep", "300ms"]`, `["-answer", "1000"]`, 1)
	if err := os.WriteFile(twice, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r = gleaner(t, "--repo", renter, "job", "run", twice)
	mustOK(t, r, "job run (2 replicas)")
	if strings.Count(r.stderr, ": passed") != 2 {
		t.Fatalf("both replicas should pass:\nstderr: %s", r.stderr)
	}
	deadline = time.Now().Add(10 * time.Second) // rep show's view is cached for 5 s
	for r = gleaner(t, "--repo", renter, "rep", "show", p.peerID); !strings.Contains(r.stdout, "probes:     2 passed"); r = gleaner(t, "--repo", renter, "rep", "show", p.peerID) {
		if time.Now().After(deadline) {
			t.Fatalf("rep show does not count the canary and the replica as probes:\n%s", r.stdout)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func TestVerifyProofOffline(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	_, a, _ := ledger.NewEntry(key, nil, ledger.TypeOutcome, []byte(`{"a":1}`), time.Now())
	_, b, _ := ledger.NewEntry(key, nil, ledger.TypeOutcome, []byte(`{"b":2}`), time.Now())
	ra, _ := a.Marshal()
	rb, _ := b.Marshal()
	proof, err := ledger.NewEquivocationProof(ra, rb).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good, junk := filepath.Join(dir, "proof.cbor"), filepath.Join(dir, "junk")
	_ = os.WriteFile(good, proof, 0o600)
	_ = os.WriteFile(junk, []byte("not a proof"), 0o600)
	r := gleaner(t, "ledger", "verify-proof", good)
	mustOK(t, r, "verify-proof")
	id, _ := peer.IDFromPrivateKey(key)
	if !strings.Contains(r.stdout, "valid equivocation proof against "+id.String()) {
		t.Fatalf("verify-proof: %s", r.stdout)
	}
	if r = gleaner(t, "ledger", "verify-proof", junk); r.code != 1 || !strings.Contains(r.stderr, "not a valid fraud proof") {
		t.Fatalf("junk proof: exit %d, %q", r.code, r.stderr)
	}

	// A provider that gave one GPU to two silver leases at once.
	renter1, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	renter2, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	lease := func(renter crypto.PrivKey, job string, start time.Time) []byte {
		rid, _ := peer.IDFromPrivateKey(renter)
		l := &auction.Lease{JobID: job, Network: "local", Renter: rid.String(), Provider: id.String(), Tier: auction.Silver,
			Price: 1_000_000, GPUs: 1, Start: start.Unix(), End: start.Add(time.Hour).Unix(), BillingSec: 60,
			Bid: []byte("bid"), GPUUUIDHash: []string{"0123abcd"}}
		sl, err := auction.ProposeLease(l, renter)
		if err != nil {
			t.Fatal(err)
		}
		if err := sl.CounterSign(key); err != nil {
			t.Fatal(err)
		}
		raw, _ := sl.Marshal()
		return raw
	}
	now := time.Now()
	dbl, _ := ledger.NewDoubleLeaseProof(lease(renter1, "a", now), lease(renter2, "b", now.Add(10*time.Minute))).Marshal()
	dblFile := filepath.Join(dir, "double-lease.cbor")
	_ = os.WriteFile(dblFile, dbl, 0o600)
	r = gleaner(t, "ledger", "verify-proof", dblFile)
	mustOK(t, r, "verify-proof (double lease)")
	if !strings.Contains(r.stdout, "valid GPU leased twice proof against "+id.String()) || !strings.Contains(r.stdout, "GPU 0123abcd given to job a") {
		t.Fatalf("verify-proof (double lease): %s", r.stdout)
	}
}
