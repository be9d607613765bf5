package main

import (
	"context"
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
	"github.com/gleaner-net/gleaner/testnet/demoimage"
	"github.com/gleaner-net/gleaner/testnet/staticimage"
)

// shardImage is the demo job under a tag of its own: the demo job prints
// and writes its shard, and the shared tag may be rebuilt meanwhile by a
// test of another checkout whose demo job does not.
const shardImage = "gleaner-demojob-shards:1"

func buildShardImage(t *testing.T) {
	t.Helper()
	requireDocker(t) // fails loudly without Docker, as every Docker test here
	buildImageOnce(t, shardImage, func(ctx context.Context) error {
		return staticimage.Build(ctx, "../..", staticimage.Image{Package: "./testnet/demojob", Tag: shardImage})
	})
}

func arraySpec(t *testing.T, name, command string, shards, parallel int) string {
	t.Helper()
	spec := fmt.Sprintf("name: %s\nimage: %s\ncommand: %s\nresources: {gpus: 1}\ntier: silver\nmax_price: 1.00\n"+
		"duration: {max: 10m}\nallow_simulated: true\noutputs: {path: /outputs, max_size: 16MiB}\narray: {shards: %d, max_parallel: %d}\n",
		name, shardImage, command, shards, parallel)
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func arrayStatus(t *testing.T, rn *rnode, id string) renting.JobRecord {
	t.Helper()
	var j renting.JobRecord
	decodeJSON(t, rn.cli(t, "job", "status", id, "--json"), "job status "+id, &j)
	if j.ArrayView == nil {
		t.Fatalf("job status %s: no array view: %+v", id, j)
	}
	return j
}

// An array of 6 shards over two providers of two GPUs: one ID; every
// shard runs once with its own GLEANER_SHARD_INDEX, its log and outputs
// reached through the array's ID; an array cancelled mid-run leaves no
// container.
func TestJobArrayEndToEnd(t *testing.T) {
	waitsOnItsOwnJobs(t)
	buildShardImage(t)
	p1 := provider(t, "p1", "2xRTX4090")
	p2 := provider(t, "p2", "2xRTX4090")
	rn := startRenter(t, p1, p2)
	all := []*rnode{p1, p2, rn}

	r := rn.cli(t, "job", "run", arraySpec(t, "shards", `["-write", "/outputs", "-lines", "1"]`, 6, 4))
	mustOK(t, r, "job run array.yaml\n"+tails(all))
	id := strings.TrimSpace(r.stdout)
	if !strings.Contains(r.stderr, "6/6 done") {
		t.Errorf("job run's progress lines: %q", r.stderr)
	}
	j := arrayStatus(t, rn, id)
	v := j.ArrayView
	if j.State != renting.StateCompleted || v.Done != 6 || len(v.ShardJobs) != 6 {
		t.Fatalf("array %s: %s, %s", id, j.State, v.Line())
	}
	providers := map[string]int{}
	for _, sh := range v.ShardJobs {
		providers[sh.Provider]++
		if sh.Attempts != 1 {
			t.Errorf("shard %d ran %d times", sh.Index, sh.Attempts)
		}
	}
	if len(providers) != 2 {
		t.Errorf("the shards ran on %v, want both providers", providers)
	}
	if !strings.Contains(rn.cli(t, "job", "status", id).stdout, "6/6 done, 0 running, 0 re-auctioning, 0 failed; spent ") {
		t.Errorf("job status: %q", rn.cli(t, "job", "status", id).stdout)
	}
	if ls := rn.cli(t, "job", "ls"); !strings.Contains(ls.stdout, "array: 6/6 done") {
		t.Errorf("job ls has no line for the array:\n%s", ls.stdout)
	}
	logs := rn.cli(t, "job", "logs", id, "--shard", "4")
	mustOK(t, logs, "job logs --shard 4")
	if !strings.Contains(logs.stdout, "shard 4 of 6") {
		t.Errorf("shard 4's log: %q", logs.stdout)
	}

	dir := filepath.Join(t.TempDir(), "results")
	mustOK(t, rn.cli(t, "job", "fetch", id, dir), "job fetch "+id)
	for i := range 6 {
		want := demoimage.Results()
		want["shard.txt"] = []byte(fmt.Sprintf("shard %d of 6\n", i))
		checkTree(t, filepath.Join(dir, fmt.Sprintf("shard-%d", i)), want)
	}

	// Cancelled while its shards run: every shard ends, no container stays.
	sub := rn.cli(t, "job", "submit", arraySpec(t, "long", `["-sleep", "5m", "-lines", "5"]`, 4, 4))
	mustOK(t, sub, "job submit long array")
	long := strings.TrimSpace(sub.stdout)
	waitUntil(t, 3*time.Minute, "the long array's shards run", func() bool {
		running := 0
		for _, sh := range arrayStatus(t, rn, long).ArrayView.ShardJobs {
			if sh.State == renting.StateRunning {
				running++
			}
		}
		return running == 4
	}, all...)
	mustOK(t, rn.cli(t, "job", "cancel", long), "job cancel "+long)
	if j := arrayStatus(t, rn, long); j.State != renting.StateCancelled {
		t.Fatalf("after cancel: %s", j.State)
	}
	shardsOfLong := arrayStatus(t, rn, long).ArrayView.ShardJobs
	waitUntil(t, time.Minute, "no container of the cancelled array's shards left", func() bool {
		for _, sh := range shardsOfLong {
			if jobContainers(t, sh.Job) != 0 {
				return false
			}
		}
		return len(containersOf(t, p1.d.peerID, false))+len(containersOf(t, p2.d.peerID, false)) == 0
	}, all...)
	for _, sh := range shardsOfLong {
		if sh.State != renting.StateCancelled {
			t.Errorf("shard %d: %s", sh.Index, sh.State)
		}
	}
}

// jobContainers counts the containers, running or not, of one job (the
// executor labels them with the job's ID behind a prefix of the node's).
func jobContainers(t *testing.T, job string) int {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--format", `{{.Label "`+executor.LabelJob+`"}}`, "--filter", "label="+executor.LabelJob).CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	n := 0
	for _, l := range strings.Fields(string(out)) {
		if strings.HasSuffix(l, "-"+job) || l == job {
			n++
		}
	}
	return n
}

// A renter killed while its array runs resumes it when started again:
// done shards stay done, running ones are followed to their end on their
// first lease, pending ones are submitted; every shard runs once.
func TestJobArrayResumesAfterRenterRestart(t *testing.T) {
	waitsOnItsOwnJobs(t)
	buildShardImage(t)
	p := provider(t, "provider", "2xRTX4090")
	rn := startRenter(t, p)
	all := []*rnode{p, rn}
	sub := rn.cli(t, "job", "submit", arraySpec(t, "resume", `["-sleep", "3s", "-lines", "3"]`, 6, 2))
	mustOK(t, sub, "job submit")
	id := strings.TrimSpace(sub.stdout)
	waitUntil(t, 2*time.Minute, "two shards done and more running", func() bool {
		v := arrayStatus(t, rn, id).ArrayView
		return v.Done >= 2 && v.Running > 0
	}, all...)
	before := arrayStatus(t, rn, id).ArrayView
	rn.restart(t, syscall.SIGKILL)
	waitUntil(t, 3*time.Minute, "the array completes after the restart", func() bool {
		return arrayStatus(t, rn, id).State == renting.StateCompleted
	}, all...)
	v := arrayStatus(t, rn, id).ArrayView
	if v.Done != 6 || v.Retries != 0 {
		t.Fatalf("after the restart: %s, %d retries (before it: %s)", v.Line(), v.Retries, before.Line())
	}
	for _, sh := range v.ShardJobs {
		j, ok := rn.job(t, sh.Job)
		if !ok || j.State != renting.StateCompleted || j.Attempts != 1 {
			t.Errorf("shard %d (%s): %s after %d leases (%q)", sh.Index, sh.Job, j.State, j.Attempts, j.Error)
		}
	}
	if logs := rn.cli(t, "job", "logs", id, "--shard", "5"); !strings.Contains(logs.stdout, "shard 5 of 6") {
		t.Errorf("shard 5's log: %q", logs.stdout)
	}
}

// An array cancelled as its shards are leased and their containers made
// leaves none: a provider told to cancel a job whose container is being
// made stops it once made (before, it ran on until its lease ended).
func TestJobArrayCancelledWhileStartingLeavesNoContainer(t *testing.T) {
	buildShardImage(t)
	p := provider(t, "provider", "2xRTX4090")
	rn := startRenter(t, p)
	sub := rn.cli(t, "job", "submit", arraySpec(t, "starting", `["-sleep", "5m", "-lines", "5"]`, 2, 2))
	mustOK(t, sub, "job submit")
	id := strings.TrimSpace(sub.stdout)
	var states []string
	waitUntil(t, time.Minute, "both shards leased", func() bool {
		states = states[:0]
		for _, sh := range arrayStatus(t, rn, id).ArrayView.ShardJobs {
			if sh.State == "" || sh.State == renting.StateAuction {
				return false
			}
			states = append(states, sh.State)
		}
		return true
	}, p, rn)
	mustOK(t, rn.cli(t, "job", "cancel", id), "job cancel")
	t.Logf("cancelled with the shards %v", states)
	shards := arrayStatus(t, rn, id).ArrayView.ShardJobs
	waitUntil(t, 30*time.Second, "no container of the cancelled shards", func() bool {
		n := 0
		for _, sh := range shards {
			n += jobContainers(t, sh.Job)
		}
		return n == 0
	}, p, rn)
}

// A provider killed while it runs shards: they are placed again (on the
// provider left) and the array completes, each shard done once.
func TestJobArrayOutlivesAKilledProvider(t *testing.T) {
	waitsOnItsOwnJobs(t)
	buildShardImage(t)
	p1 := provider(t, "p1", "2xRTX4090")
	p2 := provider(t, "p2", "2xRTX4090")
	rn := startRenter(t, p1, p2)
	all := []*rnode{p1, p2, rn}
	sub := rn.cli(t, "job", "submit", arraySpec(t, "survive", `["-sleep", "8s", "-lines", "4", "-write", "/outputs"]`, 4, 4))
	mustOK(t, sub, "job submit")
	id := strings.TrimSpace(sub.stdout)
	onP1 := func() int {
		n := 0
		for _, sh := range arrayStatus(t, rn, id).ArrayView.ShardJobs {
			if sh.Provider == p1.d.peerID && sh.State == renting.StateRunning {
				n++
			}
		}
		return n
	}
	waitUntil(t, time.Minute, "shards running on p1", func() bool { return onP1() > 0 }, all...)
	p1.stop(t, syscall.SIGKILL)
	waitUntil(t, 4*time.Minute, "the array completes without p1", func() bool {
		return renting.Terminal(arrayStatus(t, rn, id).State)
	}, all...)
	j := arrayStatus(t, rn, id)
	if j.State != renting.StateCompleted || j.ArrayView.Done != 4 {
		t.Fatalf("array %s: %s, %s (%s)\n%s", id, j.State, j.ArrayView.Line(), j.Error, tails(all))
	}
	t.Logf("after losing p1: %s, %d retries", j.ArrayView.Line(), j.ArrayView.Retries)
	if j.ArrayView.Retries == 0 {
		t.Errorf("no shard was placed again after p1 was killed")
	}
	for _, sh := range j.ArrayView.ShardJobs {
		if sh.Provider == p1.d.peerID {
			t.Errorf("shard %d's last job ran on the killed provider (%s)", sh.Index, sh.State)
		}
	}
}
