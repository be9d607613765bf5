package renter

import (
	"slices"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// newTogetherRig is a gang rig whose gang awards its members together.
func newTogetherRig(t *testing.T, size int, floors ...auction.Credits) *gangRig {
	r := newGangRig(t, size, floors...)
	r.g.AwardTogether()
	return r
}

// A gang awarding together asks for every member's award at once, each
// round over its own share of the book, the shares disjoint and dealt by
// floor: the members land on the cheapest providers, distinct, as rounds
// one after another would, and start only once all hold an award.
func TestGangAwardsItsMembersTogether(t *testing.T) {
	r := newTogetherRig(t, 3, 1_300_000, 1_000_000, 1_200_000, 1_100_000)
	first := r.g.Begin()
	if len(first) != 3 {
		t.Fatalf("Begin gave %d actions, want the 3 members' awards at once: %+v", len(first), first)
	}
	for k, a := range first {
		if a.Kind != GangAward || a.Batch != 3 || a.Share != k || !a.Patient {
			t.Fatalf("award %d: %+v, want batch 3, share %d, patient", k, a, k)
		}
	}
	r.do(first)
	if st, why := r.g.State(); st != GangRunning {
		t.Fatalf("state %s (%s)", st, why)
	}
	if !slices.Equal(r.startedWith, []int{3, 3, 3}) {
		t.Fatalf("started with %v leases held, want each start after all 3 awards", r.startedWith)
	}
	// The three cheapest: providers 2, 4 and 3 (floors 1.0, 1.1, 1.2).
	want := []string{r.m.providers[1].id, r.m.providers[3].id, r.m.providers[2].id}
	for k, share := range r.shares {
		if len(share) == 0 || share[0] != want[k] {
			t.Fatalf("share %d is %v, want it to begin with the %d-th cheapest %s", k, share, k+1, want[k])
		}
	}
	got := r.providersHeld()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("members on %v, want the three cheapest %v", got, want)
	}
	// No round asked a provider of another's share.
	for _, p := range r.m.providers {
		if q, _, _ := p.counts(); q > 1 {
			t.Fatalf("provider %s was asked %d times in one placement", p.id, q)
		}
	}
}

// A round that leases nothing in its share does not fail the placement:
// the awards the others won are kept, and its member is awarded alone,
// over the whole book (less the provider that refused), once the other
// rounds are over.
func TestGangTogetherRetriesAMemberAloneWhenItsShareFails(t *testing.T) {
	r := newTogetherRig(t, 3, 900_000, 1_000_000, 1_100_000, 1_200_000)
	// Share 0 is the cheapest and the dearest: the cheapest refuses
	// every award, the dearest declines to quote until a round fails.
	bad, late := r.m.providers[0], r.m.providers[3]
	bad.refuse, late.decline = "an internal error", "busy"
	r.onEvent = func(ev GangEvent) {
		if ev.Kind == GangAwardFailed {
			late.decline = ""
		}
	}
	r.do(r.g.Begin())
	if !slices.Equal(r.shares[0], []string{bad.id, late.id}) {
		t.Fatalf("share 0 is %v, want the cheapest and the dearest", r.shares[0])
	}
	if st, why := r.g.State(); st != GangRunning {
		t.Fatalf("state %s (%s), want running", st, why)
	}
	s := r.g.Snapshot()
	if s.Placement != 1 || len(r.released) != 0 {
		t.Fatalf("placement %d, released %v: a share's failure must not release the others' awards", s.Placement, r.released)
	}
	if len(r.awards) != 4 {
		t.Fatalf("%d awards, want the 3 together and member 0 once more alone", len(r.awards))
	}
	alone := r.awards[3]
	if alone.Rank != 0 || alone.Batch != 0 || alone.Job != GangMemberJob("train-g", 0, 1, 2) || !slices.Contains(alone.Avoid, bad.id) || len(alone.Avoid) != 3 {
		t.Fatalf("member 0 again: %+v, want alone, its second try, avoiding the refuser and the two siblings' providers", alone)
	}
	if alone.Patient {
		t.Fatal("the round alone waits for the book while its siblings' awards could lapse")
	}
	held := r.providersHeld()
	if slices.Contains(held, bad.id) || len(slices.Compact(held)) != 3 {
		t.Fatalf("members on %v", held)
	}
}

// A round alone waits for the rounds under way: an award taken back
// while siblings' rounds run is awarded again only once they are over,
// so that it cannot win a provider one of them is winning.
func TestGangTogetherAwardsAloneOnlyAfterTheRoundsUnderWay(t *testing.T) {
	g := NewGang("g", 3, 0)
	g.AwardTogether()
	acts := g.Begin()
	if len(acts) != 3 {
		t.Fatalf("Begin: %+v", acts)
	}
	if back := g.Step(GangEvent{Kind: GangAwarded, Rank: 0, Job: acts[0].Job, Provider: "p0"}); back != nil {
		t.Fatalf("after one of three awards: %+v, want to wait", back)
	}
	// Member 0's award is taken back while 1 and 2 are awarding.
	if back := g.Step(GangEvent{Kind: GangEnded, Rank: 0, Job: acts[0].Job, Provider: "p0", End: EndNotStarted}); back != nil {
		t.Fatalf("award taken back while rounds run: %+v, want nothing until they are over", back)
	}
	if back := g.Step(GangEvent{Kind: GangAwarded, Rank: 1, Job: acts[1].Job, Provider: "p1"}); back != nil {
		t.Fatalf("after member 1's award: %+v, want to wait for member 2's", back)
	}
	back := g.Step(GangEvent{Kind: GangAwarded, Rank: 2, Job: acts[2].Job, Provider: "p2"})
	if len(back) != 1 || back[0].Rank != 0 || back[0].Batch != 0 || !slices.Equal(back[0].Avoid, []string{"p0", "p1", "p2"}) {
		t.Fatalf("once the rounds are over: %+v, want member 0 alone avoiding p0 and its siblings'", back)
	}
	// Two rounds that won one provider: the second award goes.
	back = g.Step(GangEvent{Kind: GangAwarded, Rank: 0, Job: back[0].Job, Provider: "p1"})
	if len(back) != 2 || back[0].Kind != GangRelease || back[0].Rank != 0 || back[1].Kind != GangAward || back[1].Rank != 0 {
		t.Fatalf("an award on a sibling's provider: %+v, want it released and member 0 awarded again", back)
	}
}

// A node that stopped while a placement's rounds ran awards them all
// again under the same job IDs, each over its share.
func TestGangTogetherResumesEveryRoundUnderWay(t *testing.T) {
	g := NewGang("g", 3, 0)
	g.AwardTogether()
	acts := g.Begin()
	g.Step(GangEvent{Kind: GangAwarded, Rank: 1, Job: acts[1].Job, Provider: "p1"})
	again := RestoreGang(g.Snapshot()).Begin()
	if len(again) != 2 || again[0].Job != acts[0].Job || again[1].Job != acts[2].Job || again[0].Batch != 2 || again[1].Share != 1 {
		t.Fatalf("resumed with %+v, want members 0 and 2 again, in two shares", again)
	}
	if !strings.Contains(strings.Join(again[0].Avoid, ","), "p1") {
		t.Fatalf("resumed awards avoid %v, want the held p1", again[0].Avoid)
	}
}

// The book is dealt free providers first, by floor, then those that only
// look busy now; avoided ones and ones that can never run a member are
// left out.
func TestGangSharesDealFreeProvidersFirst(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 1, 1_000_000, 1_100_000, 1_200_000, 1_300_000, 1_400_000)
	spec := testSpec()
	env := auction.Env{Now: t0, Reputation: auction.NeutralReputation{}}
	book := m.book()
	busy := *book[0] // the cheapest, booked now
	busy.Booked = []auction.Booking{{Start: t0.Unix() - 60, End: t0.Unix() + 3600, GPUs: len(busy.GPUs)}}
	book[0] = &busy
	p := func(i int) string { return m.providers[i].id }
	got := GangShares(spec, book, env, []string{p(4)}, 2, nil)
	want := [][]string{{p(1), p(3)}, {p(2), p(0)}}
	if len(got) != 2 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		t.Fatalf("shares %v, want %v", got, want)
	}
	spec.Resources.GPUs = 2 // no provider has two
	for _, share := range GangShares(spec, book, env, nil, 2, nil) {
		if len(share) != 0 {
			t.Fatalf("a member no provider can run got share %v", share)
		}
	}
}
