package renter

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// gangRig carries out a Gang's actions against a fake market with the
// real auctioneer, as node/renting/gang.go does over libp2p: an award is
// a round (Auction) whose lease is held unstarted, a release and a stop
// take the lease off its provider. It runs synchronously on a manual
// clock: no sleeps, no goroutines of its own.
type gangRig struct {
	t      *testing.T
	m      *market
	auc    *Auctioneer
	g      *Gang
	spec   *auction.JobSpec
	leases map[string]*auction.Lease // job -> its lease, while a provider holds it
	// started: the jobs started, in order; startedWith: how many member
	// leases were held at each start (the barrier's proof).
	started     []string
	startedWith []int
	released    []string
	stopped     []string
	awards      []GangAction
	onEvent     func(GangEvent) // sees each award's outcome before the gang does
	// shares: the book dealt for the parallel rounds under way, as the
	// node deals it when a batch of awards comes (GangShares).
	shares [][]string
}

func newGangRig(t *testing.T, size int, floors ...auction.Credits) *gangRig {
	m := newMarket(t, newManualClock(t0), 1, floors...)
	spec := testSpec()
	spec.Retry.MaxReauctions = 2
	return &gangRig{t: t, m: m, auc: m.auctioneer(t), g: NewGang("train-g", size, spec.Retry.MaxReauctions), spec: spec,
		leases: map[string]*auction.Lease{}}
}

// do carries out acts and every action that follows from them.
func (r *gangRig) do(acts []GangAction) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a.Kind {
		case GangAward:
			if a.Batch > 0 && a.Share == 0 {
				env := auction.Env{Now: r.m.clock.Now(), Reputation: auction.NeutralReputation{}}
				r.shares = GangShares(r.spec, r.m.book(), env, a.Avoid, a.Batch, nil)
			}
			r.awards = append(r.awards, a)
			ev := r.award(a)
			if r.onEvent != nil {
				r.onEvent(ev)
			}
			acts = append(acts, r.g.Step(ev)...)
		case GangStart:
			r.started = append(r.started, a.Job)
			r.startedWith = append(r.startedWith, len(r.leases))
		case GangRelease:
			r.released = append(r.released, a.Job)
			r.drop(a.Job)
		case GangStop:
			r.stopped = append(r.stopped, a.Job)
		}
	}
}

// award runs member a.Rank's round and says what came of it.
func (r *gangRig) award(a GangAction) GangEvent {
	ms := *r.spec
	ms.GangOf = &auction.GangOf{ID: "train-g", Rank: a.Rank, Size: len(r.g.Snapshot().Members)}
	req := request(r.t, a.Job, &ms)
	req.Exclude = map[string]bool{}
	for _, p := range a.Avoid {
		req.Exclude[p] = true
	}
	if a.Batch > 0 {
		req.Only = map[string]bool{}
		for _, p := range r.shares[a.Share] {
			req.Only[p] = true
		}
	}
	res, err := r.auc.Auction(context.Background(), req)
	if err != nil {
		var nm *NoMatchError
		if !errors.As(err, &nm) {
			r.t.Fatal(err)
		}
		ev := GangEvent{Kind: GangAwardFailed, Rank: a.Rank, Job: a.Job, Why: err.Error()}
		for _, aw := range res.Explain.Awards {
			ev.Failed = append(ev.Failed, aw.Provider)
		}
		return ev
	}
	r.leases[a.Job] = res.Lease
	return GangEvent{Kind: GangAwarded, Rank: a.Rank, Job: a.Job, Provider: res.Lease.Provider}
}

// drop takes job's lease off its provider and frees its GPUs.
func (r *gangRig) drop(job string) {
	l := r.leases[job]
	if l == nil {
		r.t.Fatalf("released %s, which holds no lease", job)
	}
	p := r.m.net.providers[l.Provider]
	p.mu.Lock()
	delete(p.leases, job)
	for h, j := range p.used {
		if j == job {
			delete(p.used, h)
		}
	}
	p.mu.Unlock()
	delete(r.leases, job)
}

// end reports job's end, as its stream would.
func (r *gangRig) end(rank int, end End, why string) {
	m := r.g.Snapshot().Members[rank]
	ev := GangEvent{Kind: GangEnded, Rank: rank, Job: m.Job, Provider: r.leases[m.Job].Provider, End: end, Why: why}
	r.drop(m.Job)
	r.do(r.g.Step(ev))
}

// providersHeld is every provider holding a lease of the gang.
func (r *gangRig) providersHeld() []string {
	var ps []string
	for _, l := range r.leases {
		ps = append(ps, l.Provider)
	}
	slices.Sort(ps)
	return ps
}

func TestGangStartsOnlyOnceEveryMemberHoldsAnAward(t *testing.T) {
	r := newGangRig(t, 3, 1_000_000, 1_100_000, 1_200_000, 1_300_000)
	r.do(r.g.Begin())
	if st, why := r.g.State(); st != GangRunning {
		t.Fatalf("state %s (%s)", st, why)
	}
	if len(r.started) != 3 || !slices.Equal(r.startedWith, []int{3, 3, 3}) {
		t.Fatalf("started %v with %v leases held; want all 3 started, each only once all 3 held a lease", r.started, r.startedWith)
	}
	held := slices.Compact(r.providersHeld())
	if len(held) != 3 {
		t.Fatalf("members on %v: not 3 distinct providers", held)
	}
	// Each later member avoided the providers the earlier ones held.
	if len(r.awards[2].Avoid) != 2 {
		t.Fatalf("member 2 avoided %v, want its two siblings' providers", r.awards[2].Avoid)
	}
	for _, a := range r.awards {
		if a.Job != GangMemberJob("train-g", a.Rank, 1, 1) {
			t.Fatalf("award %+v: not the first placement's job", a)
		}
	}
}

// A member whose award every provider left fails: the awards the others
// hold are released unstarted (no lease left, nothing started, so
// nothing charged), and the gang is placed again away from the provider
// that refused.
func TestGangAwardThatFailsReleasesTheOthers(t *testing.T) {
	r := newGangRig(t, 3, 900_000, 1_000_000, 1_100_000)
	bad := r.m.providers[0]
	bad.refuse = "an internal error"
	r.do(r.g.Begin())
	st, why := r.g.State()
	if st != GangFailed || !strings.Contains(why, "member 2") {
		t.Fatalf("state %s (%s), want failed on member 2: two good providers cannot hold three members", st, why)
	}
	if len(r.started) != 0 {
		t.Fatalf("started %v: a gang that was never whole must start nothing", r.started)
	}
	if len(r.leases) != 0 {
		t.Fatalf("leases left on %v after the gang failed to be placed", r.providersHeld())
	}
	for _, p := range r.m.providers {
		if _, _, used := p.counts(); used != 0 {
			t.Fatalf("provider %s still holds %d GPUs", p.id, used)
		}
	}
	snap := r.g.Snapshot()
	if !slices.Equal(snap.Avoid, []string{bad.id}) {
		t.Fatalf("avoided %v, want the refusing provider", snap.Avoid)
	}
	// The first placement held two awards and released them; the later
	// placements did not ask the refusing provider again.
	if len(r.released) < 2 || !strings.HasSuffix(r.released[0], "-m0") {
		t.Fatalf("released %v", r.released)
	}
	if snap.Placement != MaxGangPlacements {
		t.Fatalf("%d placements, want %d", snap.Placement, MaxGangPlacements)
	}
}

func TestGangPlacedAgainAwayFromARefusingProvider(t *testing.T) {
	// The cheapest provider refuses every award; the dearest declines to
	// quote during the first placement, so member 2's round there finds
	// only the refuser and leases nothing.
	r := newGangRig(t, 3, 900_000, 1_000_000, 1_100_000, 1_200_000)
	bad, late := r.m.providers[0], r.m.providers[3]
	bad.refuse, late.decline = "an internal error", "busy"
	r.onEvent = func(ev GangEvent) {
		if ev.Kind == GangAwardFailed {
			late.decline = ""
		}
	}
	r.do(r.g.Begin())
	if st, why := r.g.State(); st != GangRunning {
		t.Fatalf("state %s (%s), want running after a second placement", st, why)
	}
	s := r.g.Snapshot()
	if s.Placement != 2 || !slices.Equal(s.Avoid, []string{bad.id}) || len(r.released) != 2 {
		t.Fatalf("placement %d, avoid %v, released %v", s.Placement, s.Avoid, r.released)
	}
	for _, j := range r.started {
		if !strings.HasSuffix(j, "-2") {
			t.Fatalf("started %s of the placement that failed", j)
		}
	}
	held := r.providersHeld()
	if slices.Contains(held, bad.id) || len(slices.Compact(held)) != 3 {
		t.Fatalf("members on %v", held)
	}
	if _, awards, _ := bad.counts(); awards != 3 {
		t.Fatalf("the refusing provider was awarded %d times, want 3 (only in the first placement)", awards)
	}
}

func TestGangLostMemberStopsTheOthersAndIsPlacedAgain(t *testing.T) {
	r := newGangRig(t, 3, 1_000_000, 1_100_000, 1_200_000, 1_300_000)
	r.do(r.g.Begin())
	first := r.g.Snapshot().Members
	lost := r.leases[first[1].Job].Provider
	r.end(1, EndLost, "the provider could not be reached")
	if st, _ := r.g.State(); st != GangStopping {
		t.Fatalf("state %s, want stopping while the others stop", st)
	}
	if want := []string{first[0].Job, first[2].Job}; !slices.Equal(r.stopped, want) {
		t.Fatalf("stopped %v, want %v", r.stopped, want)
	}
	r.end(0, EndCancelled, "cancelled")
	if len(r.awards) != 3 {
		t.Fatalf("placed again before every member stopped: %v", r.awards[3:])
	}
	r.end(2, EndCancelled, "cancelled")
	if st, why := r.g.State(); st != GangRunning {
		t.Fatalf("state %s (%s), want running again", st, why)
	}
	again := r.awards[3:]
	if len(again) != 3 || len(r.started) != 6 {
		t.Fatalf("re-placement awarded %d, started %d in all", len(again), len(r.started))
	}
	// Only the first member of a placement waits for the book to catch
	// up: a later one would leave its siblings' awards to lapse.
	if !r.awards[0].Patient || r.awards[1].Patient || !again[0].Patient || again[1].Patient || again[2].Patient {
		t.Fatalf("patience: first placement %v, again %v %v %v", r.awards[0].Patient, again[0].Patient, again[1].Patient, again[2].Patient)
	}
	for _, a := range again {
		if a.Job != GangMemberJob("train-g", a.Rank, 2, 1) || a.From != first[a.Rank].Job || !slices.Contains(a.Avoid, lost) {
			t.Fatalf("re-award %+v: want placement 2's job, resuming from %s, avoiding the lost %s", a, first[a.Rank].Job, lost)
		}
	}
	if slices.Contains(r.providersHeld(), lost) {
		t.Fatal("placed again on the provider that was lost")
	}
	if s := r.g.Snapshot(); s.Reauctions != 1 || s.Preemptions != 0 {
		t.Fatalf("reauctions %d, preemptions %d", s.Reauctions, s.Preemptions)
	}
}

func TestGangPreemptionSpendsNoReauctionAndCompletes(t *testing.T) {
	r := newGangRig(t, 2, 1_000_000, 1_100_000)
	r.do(r.g.Begin())
	preemptor := r.leases[r.g.Snapshot().Members[0].Job].Provider
	r.end(0, EndPreempted, "preempted")
	r.end(1, EndCancelled, "cancelled")
	s := r.g.Snapshot()
	if st, _ := r.g.State(); st != GangRunning || s.Preemptions != 1 || s.Reauctions != 0 || slices.Contains(s.Avoid, preemptor) {
		t.Fatalf("state %s, %+v: a preemption is placed again, spends nothing and avoids no one", st, s)
	}
	r.end(0, EndCompleted, "")
	if st, _ := r.g.State(); st != GangRunning {
		t.Fatalf("one member done: %s", st)
	}
	r.end(1, EndCompleted, "")
	if st, _ := r.g.State(); st != GangCompleted {
		t.Fatalf("every member done: %s", st)
	}
}

func TestGangMemberFailureFailsTheGang(t *testing.T) {
	r := newGangRig(t, 3, 1_000_000, 1_100_000, 1_200_000)
	r.do(r.g.Begin())
	r.end(2, EndFailed, "exited with code 3")
	st, why := r.g.State()
	if st != GangFailed || !strings.Contains(why, "member 2: exited with code 3") || len(r.stopped) != 2 {
		t.Fatalf("state %s (%s), stopped %v", st, why, r.stopped)
	}
	r.end(0, EndCancelled, "cancelled")
	r.end(1, EndCancelled, "cancelled")
	if len(r.awards) != 3 {
		t.Fatal("a failed gang was placed again")
	}
}

func TestGangLostTooOftenFails(t *testing.T) {
	r := newGangRig(t, 2, 1_000_000, 1_100_000, 1_200_000, 1_300_000, 1_400_000, 1_500_000, 1_600_000)
	r.do(r.g.Begin())
	for range r.spec.Retry.MaxReauctions {
		r.end(0, EndLost, "lost")
		r.end(1, EndCancelled, "cancelled")
	}
	r.end(0, EndLost, "lost")
	if st, why := r.g.State(); st != GangFailed || !strings.Contains(why, "max_reauctions") {
		t.Fatalf("state %s (%s)", st, why)
	}
}

func TestGangCancelReleasesAwardsAndStopsMembers(t *testing.T) {
	r := newGangRig(t, 2, 1_000_000, 1_100_000)
	r.do(r.g.Begin())
	r.do(r.g.Cancel())
	if st, _ := r.g.State(); st != GangCancelled || len(r.stopped) != 2 {
		t.Fatalf("state %s, stopped %v", st, r.stopped)
	}
	if r.g.Cancel() != nil {
		t.Fatal("a second cancel acted")
	}
	// Cancelled mid-placement: the award in flight is let go on arrival.
	g := NewGang("g", 2, 0)
	acts := g.Begin()
	g.Cancel()
	back := g.Step(GangEvent{Kind: GangAwarded, Rank: 0, Job: acts[0].Job, Provider: "p"})
	if len(back) != 1 || back[0].Kind != GangRelease {
		t.Fatalf("an award arriving after the cancel: %+v", back)
	}
}

// A node that stopped while a member's round ran awards it again under
// the same job ID, keeping the awards already held.
func TestGangResumesFromItsSnapshot(t *testing.T) {
	g := NewGang("g", 3, 0)
	a0 := g.Begin()[0]
	a1 := g.Step(GangEvent{Kind: GangAwarded, Rank: 0, Job: a0.Job, Provider: "p0"})[0]
	back := RestoreGang(g.Snapshot())
	again := back.Begin()
	if len(again) != 1 || again[0].Job != a1.Job || again[0].Rank != 1 || !slices.Equal(again[0].Avoid, []string{"p0"}) {
		t.Fatalf("resumed with %+v, want member 1's award again avoiding p0", again)
	}
	// An event for an earlier job is ignored.
	if acts := back.Step(GangEvent{Kind: GangEnded, Rank: 0, Job: "old", End: EndLost}); acts != nil {
		t.Fatalf("stale event acted: %+v", acts)
	}
	// An award taken back before the start: that member alone is
	// awarded again, away from that provider.
	acts := back.Step(GangEvent{Kind: GangEnded, Rank: 0, Job: a0.Job, Provider: "p0", End: EndNotStarted})
	if len(acts) != 1 || acts[0].Rank != 0 || !slices.Contains(acts[0].Avoid, "p0") || acts[0].Job != GangMemberJob("g", 0, 1, 2) || acts[0].Job == a0.Job {
		t.Fatalf("after an award taken back: %+v", acts)
	}
}

func TestGangFitsNamesTheFieldWhenTheBookIsTooSmall(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_100_000, 1_200_000)
	spec := testSpec()
	env := auction.Env{Now: t0, Reputation: auction.NeutralReputation{}}
	spec.Gang = &auction.GangSpec{Members: 3}
	if err := GangFits(spec, m.book(), env); err != nil {
		t.Fatalf("3 members on 3 providers: %v", err)
	}
	spec.Gang.Members = 4 // 8 GPUs each, but one member per provider
	err := GangFits(spec, m.book(), env)
	var se *auction.SpecError
	if !errors.As(err, &se) || se.Field != "gang.members" || !strings.Contains(se.Msg, "the offer book has 3") || !errors.Is(err, auction.ErrBadJobSpec) {
		t.Fatalf("got %v", err)
	}
	// A provider whose GPUs are all booked now (a gang just cancelled,
	// its offer not yet republished) can still hold a member later.
	busy := *m.providers[0].offer
	busy.Booked = []auction.Booking{{Start: t0.Unix() - 60, End: t0.Unix() + 3600, GPUs: len(busy.GPUs)}}
	book := fakeBook{&busy, m.providers[1].offer, m.providers[2].offer}
	spec.Gang.Members, spec.Tier = 3, auction.Silver
	if err := GangFits(spec, book, env); err != nil {
		t.Fatalf("a booked provider counted as never able to hold a member: %v", err)
	}
	spec.Tier = auction.Bronze
	spec.Gang.Members, spec.Resources.GPUs = 2, 9 // no provider has 9 GPUs
	if err := GangFits(spec, m.book(), env); err == nil {
		t.Fatal("a member no provider can hold was accepted")
	}
}

// A renter restarted with its gang running follows every running member
// again, on the same jobs, and the gang goes on: no stop, no new
// placement, nothing spent; a member lost after the restart is acted on
// as before. One restarted while stopping stops its members again; one
// restarted while placing lets the awards go and places it anew.
func TestGangRestartedFollowsItsRunningMembers(t *testing.T) {
	r := newGangRig(t, 2, 1_000_000, 1_100_000, 1_200_000)
	r.do(r.g.Begin())
	running := []string{r.g.Snapshot().Members[0].Job, r.g.Snapshot().Members[1].Job}
	r.g = RestoreGang(r.g.Snapshot())
	acts := r.g.Restarted()
	follows := func(a GangAction, rank int) bool {
		return a.Kind == GangFollow && a.Rank == rank && a.Job == running[rank]
	}
	if len(acts) != 2 || !follows(acts[0], 0) || !follows(acts[1], 1) {
		t.Fatalf("restarted while running: %+v, want a follow of %v", acts, running)
	}
	r.do(acts)
	if st, _ := r.g.State(); st != GangRunning || len(r.stopped) != 0 || r.g.Snapshot().Placement != 1 {
		t.Fatalf("state %s, stopped %v, placement %d", st, r.stopped, r.g.Snapshot().Placement)
	}
	r.end(0, EndCompleted, "")
	r.end(1, EndLost, "provider lost")
	if s := r.g.Snapshot(); s.Placement != 2 || s.Reauctions != 1 {
		t.Fatalf("a member lost after the restart: %+v", s)
	}

	// Restarted with one member done and none running: completed.
	d := newGangRig(t, 2, 1_000_000, 1_100_000)
	d.do(d.g.Begin())
	d.end(0, EndCompleted, "")
	snap := d.g.Snapshot()
	snap.Members[1].Phase = MemberDone // its end saved, the gang's step not
	d.g = RestoreGang(snap)
	if acts := d.g.Restarted(); len(acts) != 0 {
		t.Fatalf("nothing left running: %+v", acts)
	}
	if st, _ := d.g.State(); st != GangCompleted {
		t.Fatalf("every member done before the restart: %s", st)
	}

	// Restarted while stopping its members for a new placement.
	p := newGangRig(t, 2, 1_000_000, 1_100_000, 1_200_000)
	p.do(p.g.Begin())
	p.end(0, EndPreempted, "preempted")
	if len(p.stopped) != 1 {
		t.Fatalf("stopped %v", p.stopped)
	}
	p.g = RestoreGang(p.g.Snapshot())
	p.stopped = nil
	p.do(p.g.Restarted())
	if st, _ := p.g.State(); st != GangStopping || len(p.stopped) != 1 {
		t.Fatalf("restarted while stopping: state %s, stopped %v", st, p.stopped)
	}
	p.end(1, EndCancelled, "stopped with its gang")
	if s := p.g.Snapshot(); s.Placement != 2 || s.Reauctions != 0 || s.Preemptions != 1 {
		t.Fatalf("after the stop: %+v", s)
	}

	g := NewGang("g", 2, 0)
	a0 := g.Begin()[0]
	g.Step(GangEvent{Kind: GangAwarded, Rank: 0, Job: a0.Job, Provider: "p0"})
	g = RestoreGang(g.Snapshot())
	acts = g.Restarted()
	if len(acts) != 3 || acts[0].Kind != GangRelease || acts[1].Kind != GangRelease || acts[2].Kind != GangAward || acts[2].Job != GangMemberJob("g", 0, 2, 1) {
		t.Fatalf("restarted while placing: %+v", acts)
	}
}
