package node

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// A renter restarted while its gold reservation waits for the window
// attaches to the provider's waiting run (it cannot start it again: the
// secrets were never stored): the job begins at its window, on its
// reservation, and completes, paid on the new stream.
func TestAReservationSurvivesItsRenterRestarting(t *testing.T) {
	r := newHostileRig(t, Options{}, goldProvider)
	rn := renterOf(t, r.ctx, r.prov)
	gold, err := rn.renterJobs.Submit([]byte(goldSpec("waits", "+40s", "4s")), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := waitJob(t, rn, gold.ID, 30*time.Second, "reserved", func(j *renting.JobRecord) bool { return j.State == renting.StateReserved })
	rn = restartNode(t, r.ctx, rn)
	if err := rn.Host().LibP2P().Connect(r.ctx, addrInfo(r.prov.Host())); err != nil {
		t.Fatal(err)
	}
	gj := waitJob(t, rn, gold.ID, 90*time.Second, "the reservation completed after the renter's restart", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	if gj.LeaseCID != g.LeaseCID || gj.Attempts != 1 || gj.Vouchers < 1 {
		t.Errorf("the job ran on lease %s (%d attempts, %d vouchers), want its reservation %s, once, paid", gj.LeaseCID, gj.Attempts, gj.Vouchers, g.LeaseCID)
	}
	if off := gj.StartedAt.Sub(*g.Reserved); off < -5*time.Second || off > onTime {
		t.Errorf("the reservation began %v after its start, want at it", off)
	}
	out, _ := rn.renterJobs.LogsOf(gold.ID)
	checkLines(t, string(out), 2)
}

// blockJobs makes prov unreachable for jobs (its job protocol is gone,
// and the renter's connection to it closed, which breaks the job's
// stream) until the returned function restores it.
func blockJobs(t *testing.T, prov, rn *Node) (unblock func()) {
	protos := []protocol.ID{prov.Host().ProtocolID(wire.JobProto)}
	for _, p := range protos {
		prov.Host().LibP2P().RemoveStreamHandler(p)
	}
	_ = rn.Host().LibP2P().Network().ClosePeer(prov.Host().ID())
	return func() {
		for _, p := range protos {
			prov.Host().LibP2P().SetStreamHandler(p, prov.tasks.handler(prov.providerJobs.HandleJob))
		}
	}
}

// A renter that loses a running job's provider for a while comes back to
// the same lease (shown in job status) and follows the job to its end:
// one attempt, the vouchers going on, each log line once although the
// provider replays its tail on the attach.
func TestARenterReattachesToAProviderItLostForAWhile(t *testing.T) {
	waitsOnItsOwnJobs(t)
	r := newHostileRig(t, Options{}, nil)
	rn := renterOf(t, r.ctx, r.prov)
	j, err := rn.renterJobs.Submit([]byte(linesSpec("patient", "20s", 10)), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := waitJob(t, rn, j.ID, 60*time.Second, "two steps logged", func(*renting.JobRecord) bool {
		b, _ := rn.renterJobs.LogsOf(j.ID)
		return strings.Contains(string(b), "step 2/10 done")
	})
	unblock := blockJobs(t, r.prov, rn)
	lost := waitJob(t, rn, j.ID, 30*time.Second, "the wait shown", func(j *renting.JobRecord) bool {
		return strings.Contains(j.Error, "re-attaching (try 2")
	})
	t.Logf("while lost: %s", lost.Error)
	unblock()
	done := waitJob(t, rn, j.ID, 60*time.Second, "completed on its lease", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	if done.Attempts != 1 || done.LeaseCID != first.LeaseCID || done.Vouchers <= first.Vouchers {
		t.Errorf("completed in %d attempts on %s with %d vouchers (%d before the loss), want 1 on %s, the vouchers going on",
			done.Attempts, done.LeaseCID, done.Vouchers, first.Vouchers, first.LeaseCID)
	}
	out, _ := rn.renterJobs.LogsOf(j.ID)
	checkLines(t, string(out), 10)
}

// A provider that comes back without the job (here stopped, with the
// renter cut off, so that no exit reached it) answers that it holds no
// such lease: the renter auctions the job again at once, not after the
// whole re-attach wait.
func TestAProviderBackWithoutTheJobIsLeftAtOnce(t *testing.T) {
	waitsOnItsOwnJobs(t)
	r := newHostileRig(t, Options{}, nil)
	rn := renterOf(t, r.ctx, r.prov)
	spec := strings.Replace(linesSpec("left", "40s", 4), "max_reauctions: 0", "max_reauctions: 1", 1)
	j, err := rn.renterJobs.Submit([]byte(spec), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, j.ID, 60*time.Second, "running", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning })
	blockJobs(t, r.prov, rn)
	waitJob(t, rn, j.ID, 30*time.Second, "the provider lost", func(j *renting.JobRecord) bool { return strings.Contains(j.Error, "re-attaching") })
	prov := restartNode(t, r.ctx, r.prov)
	if err := rn.Host().LibP2P().Connect(r.ctx, addrInfo(prov.Host())); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// The only provider is excluded once it lost the job: the re-auction
	// waits for offers, naming why the job left it.
	left := func(j *renting.JobRecord) string {
		if j.Explain != nil {
			for _, rej := range j.Explain.Rejected {
				if rej.Provider == prov.Host().ID().String() && rej.Check == "excluded" {
					return rej.Reason
				}
			}
		}
		return ""
	}
	end := waitJob(t, rn, j.ID, renter.ReattachFor, "auctioned again", func(j *renting.JobRecord) bool {
		return j.State == renting.StateAuction && left(j) != ""
	})
	if took := time.Since(back); took > renter.ReattachFor/2 {
		t.Errorf("the job left the provider %v after it was back, want at once", took)
	}
	if why := left(end); !strings.Contains(why, "no longer holds the lease") {
		t.Errorf("the job left its provider because %q, want that it no longer held the lease", why)
	}
}

// A renter that loses the provider of a short job and comes back only
// after the job's end (a relay that died for a while) hears how the run
// ended, not that the provider no longer holds the lease: the job is
// completed on its lease, with its exit code, its whole output (the
// lines written while the renter was away too, each once) and settled
// once.
func TestARenterBackAfterTheJobsEndGetsItsExit(t *testing.T) {
	r := newHostileRig(t, Options{}, nil)
	rn := renterOf(t, r.ctx, r.prov)
	j, err := rn.renterJobs.Submit([]byte(linesSpec("ended-away", "300ms", 4)), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := waitJob(t, rn, j.ID, 60*time.Second, "running", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning })
	unblock := blockJobs(t, r.prov, rn)
	waitFor(t, 30*time.Second, "the job ended on the provider while its renter was away", func() bool {
		return r.leaseState(j.ID) == leaseEnded && !r.prov.providerJobs.Holds(j.ID)
	})
	if cur, _ := rn.renterJobs.Get(j.ID); renting.Terminal(cur.State) {
		t.Fatalf("the renter ended the job (%s) before it came back", cur.State)
	}
	unblock()
	back := time.Now()
	done := waitJob(t, rn, j.ID, 60*time.Second, "ended after the renter came back", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	if done.State != renting.StateCompleted || done.ExitCode == nil || *done.ExitCode != 0 || done.Attempts != 1 || done.LeaseCID != first.LeaseCID || done.Charged == nil {
		t.Fatalf("ended %s (%q), exit %v, %d attempts on %s, charged %v; want completed with code 0 on its lease %s, charged",
			done.State, done.Error, done.ExitCode, done.Attempts, done.LeaseCID, done.Charged, first.LeaseCID)
	}
	t.Logf("vouchers %d (%d before the loss), paid %d, charged %d, refunded %d, bound %d, ended %v (away until %v)",
		done.Vouchers, first.Vouchers, done.Paid, *done.Charged, done.Refunded, done.ChargeBound, done.EndedAt, back)
	if n := r.settlements(first.LeaseCID); n != 1 {
		t.Errorf("%d settlements of the lease, want 1", n)
	}
	// The lines the job wrote while its renter was away came with the
	// exit (the lease's record keeps the output's tail): each once.
	out, _ := rn.renterJobs.LogsOf(j.ID)
	checkLines(t, string(out), 4)
}

// Issue 37: a job's stream lost while the provider still pulls its image
// (a relay resetting the circuit the stream and the input fetch share)
// comes back to the provider as a running job's does, and the provider
// keeps pulling meanwhile. Lost again once the job runs, later than the
// re-attach bound after that first loss, it comes back again: each loss
// after the provider was heard again has its own bound. The job
// completes on its lease, once (neither failed nor auctioned again),
// with every line of its output once.
func TestARenterReattachesToAJobLostWhilePulling(t *testing.T) {
	waitsOnItsOwnJobs(t)
	r := newHostileRig(t, Options{}, nil)
	rn := renterOf(t, r.ctx, r.prov)
	const bound = 15 * time.Second // renter.ReattachFor, shortened; ample for a redial on loopback under load
	rn.renterJobs.InjectReattachFor(bound)
	pulled := make(chan struct{}) // closed when the slow pull may end
	var release sync.Once
	done := func() { release.Do(func() { close(pulled) }) }
	t.Cleanup(done)
	r.prov.providerJobs.SetPullHook(func(string) {
		select {
		case <-pulled:
		case <-r.ctx.Done():
		}
	})
	j, err := rn.renterJobs.Submit([]byte(linesSpec("lost-pulling", "6s", 6)), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := waitJob(t, rn, j.ID, 60*time.Second, "pulling", func(j *renting.JobRecord) bool { return j.State == renting.StatePulling })
	cut := func() { _ = rn.Host().LibP2P().Network().ClosePeer(r.prov.Host().ID()) }
	cut()
	lostAt := time.Now()
	// Still pulling well past the bound from that loss: the renter came
	// back and follows the pull.
	time.Sleep(bound + 5*time.Second)
	back, _ := rn.renterJobs.Get(j.ID)
	if back.State != renting.StatePulling || back.Error != "" {
		t.Fatalf("%v after the loss in the pull, the job is %s (%q), want pulling, followed again", time.Since(lostAt).Round(time.Second), back.State, back.Error)
	}
	done()
	waitJob(t, rn, j.ID, 60*time.Second, "a step logged", func(*renting.JobRecord) bool {
		b, _ := rn.renterJobs.LogsOf(j.ID)
		return strings.Contains(string(b), "step 1/6 done")
	})
	cut()
	end := waitJob(t, rn, j.ID, 90*time.Second, "ended", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	if end.State != renting.StateCompleted || end.Attempts != 1 || end.LeaseCID != first.LeaseCID {
		t.Fatalf("the job ended %s (%q) in %d attempts on %s, want completed once on its lease %s", end.State, end.Error, end.Attempts, end.LeaseCID, first.LeaseCID)
	}
	out, _ := rn.renterJobs.LogsOf(j.ID)
	checkLines(t, string(out), 6)
}
