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

	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet/staticimage"
)

// gangImage is the demo job under a tag of its own, which prints its
// gang rank (GLEANER_GANG_RANK).
const gangImage = "gleaner-demojob-gang:1"

func buildGangImage(t *testing.T) {
	t.Helper()
	requireDocker(t)
	buildImageOnce(t, gangImage, func(ctx context.Context) error {
		return staticimage.Build(ctx, "../..", staticimage.Image{Package: "./testnet/demojob", Tag: gangImage})
	})
}

func gangSpec(t *testing.T, name string, members int) string {
	t.Helper()
	return gangSpecRunning(t, name, members, "5m")
}

// gangSpecRunning is a gang whose members each run for sleep.
func gangSpecRunning(t *testing.T, name string, members int, sleep string) string {
	t.Helper()
	spec := fmt.Sprintf("name: %s\nimage: %s\ncommand: [\"-sleep\", \"%s\", \"-lines\", \"3\"]\nresources: {gpus: 1}\ntier: silver\nmax_price: 1.00\n"+
		"duration: {max: 10m}\nallow_simulated: true\nretry: {max_reauctions: 2}\ngang: {members: %d}\n", name, gangImage, sleep, members)
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func gangStatus(t *testing.T, rn *rnode, id string) renting.JobRecord {
	t.Helper()
	var j renting.JobRecord
	decodeJSON(t, rn.cli(t, "job", "status", id, "--json"), "job status "+id, &j)
	if j.GangView == nil {
		t.Fatalf("job status %s: no gang view: %+v", id, j)
	}
	return j
}

// runningOn is the providers of the gang's members whose jobs run, by
// rank, when every member runs; nil otherwise.
func runningOn(j renting.JobRecord) []string {
	var ps []string
	for _, m := range j.GangView.MemberJobs {
		if m.State != renting.StateRunning {
			return nil
		}
		ps = append(ps, m.Provider)
	}
	return ps
}

// A gang of 3 on 4 single-GPU providers, on real daemons: a gang larger
// than the book is refused naming gang.members before anything is
// bought; the 3 members run together on 3 distinct providers, each told
// its rank; one member's provider killed stops the other members and
// places the gang again, away from it; a cancel ends every member.
func TestGangOfThreeEndToEnd(t *testing.T) {
	buildGangImage(t)
	ps := []*rnode{provider(t, "p1", "1xRTX4090"), provider(t, "p2", "1xRTX4090"), provider(t, "p3", "1xRTX4090"), provider(t, "p4", "1xRTX4090")}
	rn := startRenter(t, ps...)
	all := append(ps[:len(ps):len(ps)], rn)

	big := rn.cli(t, "job", "submit", gangSpec(t, "big", 5))
	if big.code == 0 || !strings.Contains(big.stderr, "gang.members") || !strings.Contains(big.stderr, "the offer book has 4") {
		t.Fatalf("a gang of 5 on 4 providers: exit %d, stderr %q", big.code, big.stderr)
	}
	if ls := rn.cli(t, "job", "ls", "--json"); strings.Contains(ls.stdout, "big-") {
		t.Fatalf("the refused gang left a job: %s", ls.stdout)
	}

	sub := rn.cli(t, "job", "submit", gangSpec(t, "train", 3))
	mustOK(t, sub, "job submit gang")
	id := strings.TrimSpace(sub.stdout)
	var first []string
	waitUntil(t, 3*time.Minute, "every member runs", func() bool { first = runningOn(gangStatus(t, rn, id)); return first != nil }, all...)
	j := gangStatus(t, rn, id)
	if j.State != "running" || len(first) != 3 || first[0] == first[1] || first[1] == first[2] || first[0] == first[2] {
		t.Fatalf("gang %s: %s on %v", id, j.State, first)
	}
	members := j.GangView.MemberJobs
	for _, m := range members {
		want := fmt.Sprintf("gang rank %d of 3", m.Rank)
		waitUntil(t, time.Minute, m.Job+" prints its rank", func() bool {
			return strings.Contains(rn.cli(t, "job", "logs", m.Job).stdout, want)
		}, all...)
	}
	// Each member is billed by its own provider (paid ahead at its start);
	// the gang's one total is theirs together.
	var sum int64
	for _, m := range members {
		sum += int64(m.Spent)
	}
	if sum <= 0 || int64(j.GangView.Spent) != sum || int64(j.Paid) != sum {
		t.Errorf("gang spent %d (paid %d), members %d", j.GangView.Spent, j.Paid, sum)
	}
	st := rn.cli(t, "job", "status", id)
	if !strings.Contains(st.stdout, "3 members, 3 running, placement 1") || !strings.Contains(st.stdout, "credits in all") {
		t.Errorf("job status %s:\n%s", id, st.stdout)
	}

	// Member 1's provider dies: the others are stopped and the gang is
	// placed again on three providers without it.
	var killed *rnode
	for _, p := range ps {
		if p.d.peerID == members[1].Provider {
			killed = p
		}
	}
	killed.stop(t, syscall.SIGKILL)
	var again []string
	waitUntil(t, 4*time.Minute, "the gang placed again and running", func() bool {
		j := gangStatus(t, rn, id)
		again = runningOn(j)
		return j.GangView.Placement == 2 && again != nil
	}, all...)
	for _, p := range again {
		if p == killed.d.peerID {
			t.Fatalf("placed again on the killed provider: %v", again)
		}
	}
	for _, m := range members {
		if m.Rank == 1 {
			continue // its provider is gone, and its container with it
		}
		old, err := jobOf(t, rn, m.Job)
		if err != nil || old.State != renting.StateCancelled {
			t.Errorf("member %d's first job %s: %+v %v, want cancelled with its gang", m.Rank, m.Job, old.State, err)
		}
		if n := jobContainers(t, m.Job); n != 0 {
			t.Errorf("member %d's first job still has %d containers", m.Rank, n)
		}
	}
	if j := gangStatus(t, rn, id); j.GangView.Reauctions != 1 {
		t.Errorf("re-auctions %d, want 1 (a member lost)", j.GangView.Reauctions)
	}

	mustOK(t, rn.cli(t, "job", "cancel", id), "job cancel "+id)
	now := gangStatus(t, rn, id).GangView.MemberJobs
	waitUntil(t, time.Minute, "every member of the cancelled gang ends", func() bool {
		for _, m := range now {
			if jobContainers(t, m.Job) != 0 {
				return false
			}
			if j, err := jobOf(t, rn, m.Job); err != nil || j.State != renting.StateCancelled {
				return false
			}
		}
		return true
	}, all...)
	if j := gangStatus(t, rn, id); j.State != renting.StateCancelled {
		t.Fatalf("after cancel: %s", j.State)
	}
}

// jobOf is job id's record at the renter.
func jobOf(t *testing.T, rn *rnode, id string) (renting.JobRecord, error) {
	t.Helper()
	var j renting.JobRecord
	r := rn.cli(t, "job", "status", id, "--json")
	if r.code != 0 {
		return j, fmt.Errorf("job status %s: %s", id, r.stderr)
	}
	decodeJSON(t, r, "job status "+id, &j)
	return j, nil
}

// A renter killed while its gang runs follows it again when started:
// the members go on running, on the same jobs and providers, their ends
// are seen, and the gang completes in its first placement, spending
// nothing. (Before, the restarted renter stopped every member and placed
// the gang again.)
func TestGangResumesAfterTheRenterRestarts(t *testing.T) {
	buildGangImage(t)
	ps := []*rnode{provider(t, "p1", "1xRTX4090"), provider(t, "p2", "1xRTX4090"), provider(t, "p3", "1xRTX4090")}
	rn := startRenter(t, ps...)
	all := append(ps[:len(ps):len(ps)], rn)
	sub := rn.cli(t, "job", "submit", gangSpecRunning(t, "resume", 3, "30s"))
	mustOK(t, sub, "job submit gang")
	id := strings.TrimSpace(sub.stdout)
	waitUntil(t, 3*time.Minute, "every member runs", func() bool { return runningOn(gangStatus(t, rn, id)) != nil }, all...)
	before := gangStatus(t, rn, id).GangView.MemberJobs

	rn.restart(t, syscall.SIGKILL)
	waitUntil(t, 3*time.Minute, "the gang followed to its end after the restart", func() bool {
		return gangStatus(t, rn, id).State == renting.StateCompleted
	}, all...)
	j := gangStatus(t, rn, id)
	if j.GangView.Placement != 1 || j.GangView.Reauctions != 0 || j.GangView.Preemptions != 0 {
		t.Errorf("after the restart: placement %d, %d re-auctions, %d preemptions; want the first placement followed, nothing spent",
			j.GangView.Placement, j.GangView.Reauctions, j.GangView.Preemptions)
	}
	if len(j.GangView.MemberJobs) != len(before) {
		t.Fatalf("members %+v, before the restart %+v", j.GangView.MemberJobs, before)
	}
	for i, m := range j.GangView.MemberJobs {
		if m.Job != before[i].Job || m.Provider != before[i].Provider || m.State != renting.StateCompleted {
			t.Errorf("member %d: job %s on %s, %s; want %s on %s, completed", m.Rank, m.Job, m.Provider, m.State, before[i].Job, before[i].Provider)
		}
	}

	// job run of a gang follows it to its end: every member exits 0,
	// and so does job run.
	run := rn.cli(t, "job", "run", gangSpecRunning(t, "short", 3, "2s"))
	mustOK(t, run, "job run short gang\n"+tails(all))
	short := gangStatus(t, rn, strings.TrimSpace(run.stdout))
	if short.State != renting.StateCompleted || !strings.Contains(run.stderr, "completed") {
		t.Fatalf("job run of a gang: %s\n%s", short.State, run.stderr)
	}
	for _, m := range short.GangView.MemberJobs {
		if m.State != renting.StateCompleted {
			t.Errorf("member %d: %s", m.Rank, m.State)
		}
	}

	// A member that fails for good fails the gang: job run exits 1 with
	// the member's reason, and the gang is not placed again.
	spec := gangSpecRunning(t, "bad", 2, "1s")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, []byte(strings.Replace(string(b), `"-lines", "3"`, `"-lines", "1", "-exit", "3"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := rn.cli(t, "job", "run", spec)
	if bad.code != 1 || !strings.Contains(bad.stderr, "exited with code 3") {
		t.Fatalf("job run of a gang whose members exit 3: exit %d\n%s", bad.code, bad.stderr)
	}
	// (A placement may fail to lease before one runs: offers republish
	// the GPUs the last gang freed only within seconds. A failed member
	// must not be placed again: no re-auction is spent on it.)
	g := gangStatus(t, rn, strings.TrimSpace(bad.stdout))
	if g.State != renting.StateFailed || !strings.Contains(g.Error, "exited with code 3") || g.GangView.Reauctions != 0 {
		t.Fatalf("the failing gang: %s (%s), %+v", g.State, g.Error, g.GangView)
	}
	for _, m := range g.GangView.MemberJobs {
		if m.State == renting.StateRunning || m.State == renting.StateAuction || m.State == renting.StateLeased {
			t.Errorf("member %d of the failed gang is %s", m.Rank, m.State)
		}
	}
}
