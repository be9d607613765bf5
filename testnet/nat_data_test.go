package testnet

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// Issue 37: a job's data crosses a relay. The home renter (cone NAT) and
// the provider behind the symmetric NAT share only a relayed connection,
// since hole punching cannot cross the symmetric NAT; the job's inputs
// (a directory on the renter's machine) and its outputs (sealed by the
// provider, fetched by the renter) go by CID over that connection.
func TestNATJobDataOverRelay(t *testing.T) {
	waitsApart(t)
	requireNATNet(t)
	requireDocker(t)
	hs := startHomes(t)
	waitSettled(t, hs)
	setHomeOffer(t, hs.symProv)
	waitFor(t, 30*time.Second, "the home renter has the offer", hs.all, func() bool { return hs.homeRenter.book(t)[hs.symProv.peerID] })

	runDataJob(t, hs, hs.homeRenter, hs.symProv, symGPU, "relayed-data", natDataInputSize, natJobBound)
	conns := hs.homeRenter.connsTo(t, hs.symProv.peerID)
	t.Logf("home renter -> symmetric provider: %v", conns)
	if len(conns) == 0 || hs.homeRenter.directTo(t, hs.symProv.peerID) {
		t.Errorf("the home renter's connections to the provider behind the symmetric NAT are %v; want relayed ones only", conns)
	}
}

// Issue 37: a job's data larger than what one relay circuit carries.
// The relay's circuits carry 1 MiB each way here (64 MiB by default);
// the job's 3 MiB input and its 1 MiB outputs between the home renter
// and the provider behind the symmetric NAT cross several circuits, each
// reset at its limit: the fetches dial the peer through the relay again
// and go on (node/data/redial.go), and the job's stream re-attaches.
func TestNATJobDataOutgrowsCircuits(t *testing.T) {
	waitsApart(t)
	requireNATNet(t)
	requireDocker(t)
	hs := startHomesWith(t, homesOpts{relays: 1, circuitMB: 1})
	waitSettled(t, hs)
	setHomeOffer(t, hs.symProv)
	waitFor(t, 30*time.Second, "the home renter has the offer", hs.all, func() bool { return hs.homeRenter.book(t)[hs.symProv.peerID] })

	// Each reset used to cost up to tens of seconds (bitswap's next
	// broadcast of the wants): 12 s and 54 s for the input in two runs.
	// The fetch now wants its blocks again after each redial
	// (node/data/redial.go); the longer bound stays for the job stream's
	// re-attachments on a loaded machine.
	runDataJob(t, hs, hs.homeRenter, hs.symProv, symGPU, "outgrows-circuits", natDataInputSize, 2*natJobBound)
	if hs.homeRenter.directTo(t, hs.symProv.peerID) {
		t.Errorf("the home renter reached the provider behind the symmetric NAT directly: %v", hs.homeRenter.connsTo(t, hs.symProv.peerID))
	}
}

// natDataInputSize is the big input file of a data job: several blocks
// (256 KiB chunks), far below the relay's 64 MiB a circuit.
const natDataInputSize = 3<<20 + 12345

// runDataJob runs, from renter r, a job on gpu (prov's) that reads an
// input directory made here (a small file and one of bigSize random
// bytes, given by path and imported at submit) and writes outputs, and
// waits for it at most limit. It fails the test unless the job completed
// on prov, its logs show every input file's sha256, and `job fetch`
// brings back exactly the files the job wrote.
func runDataJob(t *testing.T, hs *homesNet, r, prov *natDaemon, gpu, name string, bigSize int, limit time.Duration) renting.JobRecord {
	t.Helper()
	dir := t.TempDir()
	big := make([]byte, bigSize)
	_, _ = rand.Read(big)
	inputs := map[string][]byte{"prompts.txt": []byte("one\ntwo\n"), "shards/big.bin": big}
	for rel, b := range inputs {
		f := filepath.Join(dir, "in", rel)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := fmt.Sprintf(`name: %s
image: %s
command: ["-read", "/in", "-write", "/outputs", "-lines", "1"]
resources: {gpus: 1, models: [%s]}
tier: silver
max_price: 1.00
duration: {expected: 1m, max: 10m}
allow_simulated: true
inputs: [{src: ./in, path: /in}]
outputs: {path: /outputs, max_size: 16MiB}
`, name, DemoImage, gpu)
	file := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := r.cli("job", "submit", "--json", file)
	if err != nil {
		t.Fatal(err)
	}
	var j renting.JobRecord
	if err := json.Unmarshal(out, &j); err != nil {
		t.Fatalf("job submit --json: %v: %s", err, out)
	}
	j, _ = awaitJob(t, r, j, start, limit, hs.all)
	if j.State != renting.StateCompleted || j.Provider != prov.peerID || j.Outputs == "" {
		dumpLogs(t, hs.all)
		t.Fatalf("job %s ended %s at %s, outputs %q: %s", j.ID, j.State, j.Provider, j.Outputs, j.Error)
	}
	var logs node.JobLogsResult
	if err := r.call("job_logs", node.JobIDParams{ID: j.ID}, &logs); err != nil {
		t.Fatal(err)
	}
	for rel, b := range inputs {
		if want := fmt.Sprintf("input %s %x", rel, sha256.Sum256(b)); !strings.Contains(logs.Logs, want) {
			t.Errorf("the job did not read %s as given (want %q):\n%s", rel, want, logs.Logs)
		}
	}
	got := filepath.Join(t.TempDir(), "outputs")
	var res node.DataFetchResult
	if err := r.call("job_fetch", node.JobFetchParams{ID: j.ID, Dir: got, TimeoutS: 60}, &res); err != nil {
		dumpLogs(t, hs.all)
		t.Fatalf("job fetch: %v", err)
	}
	if !res.Sealed || res.CID != j.Outputs {
		t.Errorf("job fetch = %+v, want the sealed outputs %s opened", res, j.Outputs)
	}
	// The demo job also writes its listing of the inputs (inputs.txt) when
	// it reads and writes: it must name every input file with its sha256.
	want := demoimage.Results()
	listing, err := os.ReadFile(filepath.Join(got, "inputs.txt"))
	if err != nil {
		t.Fatalf("the fetched outputs lack the job's listing: %v", err)
	}
	for rel, b := range inputs {
		if line := fmt.Sprintf("input %s %x", rel, sha256.Sum256(b)); !strings.Contains(string(listing), line) {
			t.Errorf("inputs.txt lacks %q:\n%s", line, listing)
		}
	}
	want["inputs.txt"] = listing
	sameTree(t, got, want)
	return j
}

// sameTree fails the test unless dir holds exactly the files of want.
func sameTree(t testing.TB, dir string, want map[string][]byte) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if w, ok := want[filepath.ToSlash(rel)]; !ok || !bytes.Equal(b, w) {
			t.Errorf("%s: %d bytes, not what the job wrote (expected: %v)", rel, len(b), ok)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("%s holds %d files, want %d", dir, n, len(want))
	}
}
