package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet"
)

// Helpers of the restart tests (harness_restart_test.go): daemons that
// are stopped and started again on their repo, jobs read back through
// `--json`, and bounded waits that print every daemon's log tail when
// they give up.

// rnode is one repo and the daemon that runs on it now (replaced at each
// restart), with the extra flags it is started with each time.
type rnode struct {
	name  string
	repo  string
	extra []string
	d     *daemon
	// down is set while d has been stopped and not started again.
	down bool
	// logs keeps the stderr of the daemons stopped before d, so that a
	// failure shows what happened before the restart too.
	logs strings.Builder
}

// newNode inits a repo and starts its daemon. A provider's job containers
// are removed when the test ends, after the daemons are killed (cleanups
// run last-in first-out), so that a test that fails mid-job leaves nothing
// running on the shared engine.
func newNode(t *testing.T, name string, extra ...string) *rnode {
	t.Helper()
	n := &rnode{name: name, repo: initRepo(t), extra: extra}
	t.Cleanup(func() {
		if n.d != nil {
			removeContainersOf(n.d.peerID)
		}
	})
	n.d = startDaemon(t, n.repo, extra...)
	return n
}

// provider starts a node selling gpus simulated GPUs at 0.50 for silver
// and bronze.
func provider(t *testing.T, name, gpus string, extra ...string) *rnode {
	t.Helper()
	p := newNode(t, name, append([]string{"--simulate-gpus", gpus}, extra...)...)
	mustOK(t, p.cli(t, "offer", "set", "--region", "eu/DE", "--price.silver", "0.50", "--price.bronze", "0.50"), name+": offer set")
	return p
}

// startRenter starts a node that bootstraps from the providers, and waits for
// their offers in its book.
func startRenter(t *testing.T, provs ...*rnode) *rnode {
	t.Helper()
	var extra []string
	for _, p := range provs {
		extra = append(extra, "--bootstrap", p.d.addrs[0])
	}
	rn := newNode(t, "renter", extra...)
	for _, p := range provs {
		waitUntil(t, 20*time.Second, "the renter sees "+p.name+"'s offer", func() bool { return rn.hasOffer(t, p.d.peerID) }, append(provs, rn)...)
	}
	return rn
}

func (n *rnode) cli(t *testing.T, args ...string) result {
	t.Helper()
	return gleaner(t, append([]string{"--repo", n.repo}, args...)...)
}

// restart stops the daemon with sig and starts it again on the same repo
// with the same flags.
func (n *rnode) restart(t *testing.T, sig syscall.Signal) {
	t.Helper()
	n.stop(t, sig)
	n.start(t)
}

func (n *rnode) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	n.d.stop(t, sig)
	fmt.Fprintf(&n.logs, "%s--- stopped with %v ---\n", n.d.stderr, sig)
	n.down = true
}

func (n *rnode) start(t *testing.T) {
	t.Helper()
	peerID := n.d.peerID
	n.d, n.down = startDaemon(t, n.repo, n.extra...), false
	if n.d.peerID != peerID {
		t.Fatalf("%s: the identity changed across the restart: %s -> %s", n.name, peerID, n.d.peerID)
	}
}

// tail is the end of this node's daemon logs, those of earlier runs first.
func (n *rnode) tail() string {
	s := n.logs.String()
	if !n.down {
		s += n.d.stderr.String()
	}
	if len(s) > 4000 {
		s = "..." + s[len(s)-4000:]
	}
	return fmt.Sprintf("=== %s (%s) ===\n%s", n.name, n.d.peerID, s)
}

func tails(ns []*rnode) string {
	var b strings.Builder
	for _, n := range ns {
		b.WriteString(n.tail())
		b.WriteString("\n")
	}
	return b.String()
}

// waitUntil polls cond every 250 ms for at most d, and fails naming what
// it waited for, with the daemons' log tails.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool, ns ...*rnode) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v\n%s", what, d, tails(ns))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// hasOffer reports whether provider's offer is in n's book.
func (n *rnode) hasOffer(t *testing.T, provider string) bool {
	t.Helper()
	_, ok := n.offerSeq(t, provider)
	return ok
}

// offerSeq is the sequence number of provider's offer in n's book (among
// those a query admits, when one is given); ok is false when there is
// none (or n's daemon does not answer).
func (n *rnode) offerSeq(t *testing.T, provider string, query ...string) (seq uint64, ok bool) {
	t.Helper()
	r := n.cli(t, append([]string{"market", "offers", "--json"}, query...)...)
	if r.code != 0 {
		return 0, false // a restarting daemon
	}
	var res struct {
		Offers []struct {
			Provider string `json:"provider"`
			Seq      uint64 `json:"seq"`
		} `json:"offers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("market offers --json: %v\n%s", err, r.stdout)
	}
	for _, o := range res.Offers {
		if o.Provider == provider {
			return o.Seq, true
		}
	}
	return 0, false
}

// waitNewOffer waits up to d for a publication of provider's newer than
// seq in n's book: the restarted provider's own, not one n kept from
// before the stop.
func (n *rnode) waitNewOffer(t *testing.T, provider string, seq uint64, d time.Duration, what string, ns ...*rnode) {
	t.Helper()
	waitUntil(t, d, what, func() bool {
		s, ok := n.offerSeq(t, provider)
		return ok && s > seq
	}, ns...)
}

// demoSpec is a job of the demo image: lines progress lines over sleep,
// then exit 0.
func demoSpec(name, tier, sleep string, lines, reauctions int) string {
	return fmt.Sprintf("name: %s\nimage: %s\ncommand: [\"-sleep\", %q, \"-lines\", \"%d\"]\nresources: {gpus: 1}\n"+
		"tier: %s\nmax_price: 1.00\nduration: {expected: 1m, max: 10m}\nallow_simulated: true\nretry: {max_reauctions: %d}\n",
		name, testnet.DemoImage, sleep, lines, tier, reauctions)
}

// submit submits spec on n (pinned to a provider when pin is set) and
// returns the job's ID.
func (n *rnode) submit(t *testing.T, spec, pin string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"job", "submit", "--json"}
	if pin != "" {
		args = append(args, "--provider", pin)
	}
	args = append(args, file) // flags before the argument: the CLI stops parsing flags at it
	r := n.cli(t, args...)
	mustOK(t, r, "job submit")
	var j renting.JobRecord
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.ID == "" {
		t.Fatalf("job submit --json: %v\n%s", err, r.stdout)
	}
	return j.ID
}

// job is `job status ID --json`; ok is false while the daemon does not
// answer (it is restarting).
func (n *rnode) job(t *testing.T, id string) (j renting.JobRecord, ok bool) {
	t.Helper()
	r := n.cli(t, "job", "status", id, "--json")
	if r.code != 0 {
		return j, false
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("job status --json: %v\n%s", err, r.stdout)
	}
	return j, true
}

// waitJob waits up to d for job id on n to satisfy cond and returns it.
func (n *rnode) waitJob(t *testing.T, id string, d time.Duration, what string, cond func(j renting.JobRecord) bool, ns ...*rnode) renting.JobRecord {
	t.Helper()
	var last renting.JobRecord
	deadline := time.Now().Add(d)
	for {
		if j, ok := n.job(t, id); ok {
			last = j
			if cond(j) {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: %s: not within %v; last state %q, error %q\n%s", id, what, d, last.State, last.Error, tails(append(ns, n)))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func terminalState(s string) bool {
	return s == renting.StateCompleted || s == renting.StateFailed || s == renting.StateCancelled
}

// requireDocker builds the demo image; a test that needs it fails when
// Docker is missing, as the other harness tests do.
func requireDocker(t *testing.T) {
	t.Helper()
	buildImageOnce(t, testnet.DemoImage, func(ctx context.Context) error { return testnet.BuildDemoImage(ctx, "../..") })
}

// containersOf lists the job containers, running or not, that the node
// with this peer ID created (the executor labels each with it).
func containersOf(t *testing.T, peerID string, all bool) []string {
	t.Helper()
	ids, err := listContainersOf(peerID, all)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func listContainersOf(peerID string, all bool) ([]string, error) {
	args := []string{"ps", "-q", "--filter", "label=" + executor.LabelNode + "=" + peerID}
	if all {
		args = append(args, "-a")
	}
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("docker ps: %v: %s", err, out)
	}
	return strings.Fields(string(out)), nil
}

// removeContainersOf is a cleanup's: it has no test to fail and does
// what it can. The node's volumes and networks (a service job's) go too:
// a daemon killed by the test's end has no chance to remove them itself.
func removeContainersOf(peerID string) {
	if peerID == "" {
		return
	}
	if ids, _ := listContainersOf(peerID, true); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
	}
	label := "label=" + executor.LabelNode + "=" + peerID
	for _, kind := range []string{"volume", "network"} {
		out, err := exec.Command("docker", kind, "ls", "-q", "--filter", label).Output()
		if ids := strings.Fields(string(out)); err == nil && len(ids) > 0 {
			_ = exec.Command("docker", append([]string{kind, "rm"}, ids...)...).Run()
		}
	}
}

// waitsOnItsOwnJobs marks a test that spends most of its time waiting on
// its own daemons' jobs (containers sleeping, restarts, re-auctions) as
// parallel with the others so marked: its daemons keep their own repos,
// listen on ports of their own (tcp/0, rpc :0), and it finds its
// containers by its providers' peer IDs. Go runs parallel tests only
// after every serial one has ended, so a marked test never overlaps one
// that lists Docker objects or processes globally; a test that bounds how
// soon something happens (an offer back within 15 s) is not marked. Test
// time only: every check of the test is unchanged.
func waitsOnItsOwnJobs(t *testing.T) {
	t.Helper()
	t.Parallel()
}
