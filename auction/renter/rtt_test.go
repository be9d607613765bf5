package renter

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// fakeProber answers from fixed tables; a provider in neither hangs until
// the caller gives up, as one that drops pings does.
type fakeProber struct {
	rtt map[string]time.Duration
	err map[string]error
}

func (f fakeProber) MeasureRTT(ctx context.Context, p string) (time.Duration, error) {
	if err := f.err[p]; err != nil {
		return 0, err
	}
	if d, ok := f.rtt[p]; ok {
		return d, nil
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

func rttSpec(limit time.Duration) *auction.JobSpec {
	s := testSpec()
	s.Placement.MaxRTT = limit
	return s
}

func quoteOf(ex *Explain, p string) QuoteOutcome {
	for _, q := range ex.Quotes {
		if q.Provider == p {
			return q
		}
	}
	return QuoteOutcome{}
}

func rankedOf(ex *Explain, p string) *auction.Ranked {
	for i := range ex.Ranked {
		if ex.Ranked[i].Bid.Provider == p {
			return &ex.Ranked[i]
		}
	}
	return nil
}

// A renter that has measured nothing before (an empty peerstore) and a
// spec with max_rtt_ms: without a Prober every bid is refused for an
// unknown RTT; with one, each candidate is measured in the round, ranked
// by that, and the explain says so.
func TestMeasuredRTTAdmitsBidsOfAFreshRenter(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_000_000, 1_000_000)
	p1, p2, p3 := m.providers[0].id, m.providers[1].id, m.providers[2].id
	spec := rttSpec(100 * time.Millisecond)

	_, err := m.auctioneer(t).Auction(context.Background(), request(t, "job-0", spec))
	if !errors.Is(err, ErrNoMatch) {
		t.Fatalf("without a prober: %v, want no match (nothing measured)", err)
	}

	pr := fakeProber{rtt: map[string]time.Duration{p1: 40 * time.Millisecond, p2: 10 * time.Millisecond, p3: 60 * time.Millisecond}}
	res, err := m.auctioneer(t, WithProber(pr, 0)).Auction(context.Background(), request(t, "job-1", spec))
	if err != nil {
		t.Fatal(err)
	}
	// Equal prices and reputations: the nearest wins.
	if res.Lease.Provider != p2 {
		t.Errorf("leased to %s, want the nearest %s", res.Lease.Provider, p2)
	}
	ex := res.Explain
	if len(ex.Ranked) != 3 || len(ex.NotAdmitted) != 0 {
		t.Fatalf("ranked %d, not admitted %+v; want all three ranked", len(ex.Ranked), ex.NotAdmitted)
	}
	for p, d := range pr.rtt {
		q, r := quoteOf(ex, p), rankedOf(ex, p)
		if q.RTT != d || q.RTTSource != RTTMeasured || q.RTTError != "" || r.RTT != d || !r.RTTKnown || r.RTTSource != RTTMeasured {
			t.Errorf("%s: quote %+v, ranked rtt %v %v %q; want %v measured", p, q, r.RTT, r.RTTKnown, r.RTTSource, d)
		}
	}
	if got := rankedOf(ex, p2).Parts.RTT; got != 0.9 {
		t.Errorf("10 ms against a 100 ms limit scores %v, want 0.9", got)
	}
}

// A measurement in the round replaces the node's older one for admission
// and ranking: a provider the peerstore remembers as near but that
// measures far now is refused against the limit.
func TestMeasuredRTTOverridesThePeerstore(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000)
	p1, p2 := m.providers[0].id, m.providers[1].id
	m.trust.rtt[p1], m.trust.rtt[p2] = 5*time.Millisecond, 5*time.Millisecond
	pr := fakeProber{rtt: map[string]time.Duration{p1: 150 * time.Millisecond, p2: 20 * time.Millisecond}}
	res, err := m.auctioneer(t, WithProber(pr, 0)).Auction(context.Background(), request(t, "job-1", rttSpec(100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	want := []auction.Rejection{{Provider: p1, Check: auction.CheckRTT, Reason: auction.ReasonRTT}}
	if res.Lease.Provider != p2 || !reflect.DeepEqual(res.Explain.NotAdmitted, want) {
		t.Errorf("leased to %s, not admitted %+v; want %s, and %s refused for its measured RTT", res.Lease.Provider, res.Explain.NotAdmitted, p2, p1)
	}
	if q := quoteOf(res.Explain, p1); q.RTT != 150*time.Millisecond || q.RTTSource != RTTMeasured {
		t.Errorf("the refused provider's quote shows %+v, want the 150 ms measured", q)
	}
}

// A probe that gets no answer: with max_rtt_ms set, the bid is refused
// with a reason that names the probe's failure, even where the peerstore
// has an older value; without a limit, the older value ranks, marked as
// such. The probe waits its deadline, no longer: the round does not wait
// out the quote deadline for it.
func TestFailedProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMarket(t, Wall, 8, 1_000_000, 1_200_000, 1_300_000)
		p1, p2, p3 := m.providers[0].id, m.providers[1].id, m.providers[2].id
		m.trust.rtt[p1] = 30 * time.Millisecond // remembered, but silent now
		pr := fakeProber{rtt: map[string]time.Duration{p3: 20 * time.Millisecond}, err: map[string]error{p2: errors.New("protocols not supported")}}
		a := m.auctioneer(t, WithProber(pr, 0))

		began := time.Now()
		res, err := a.Auction(context.Background(), request(t, "job-1", rttSpec(100*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took != DefaultRTTDeadline {
			t.Errorf("the round took %v, want the probe deadline %v", took, DefaultRTTDeadline)
		}
		want := []auction.Rejection{
			{Provider: p1, Check: auction.CheckRTT, Reason: "rtt not measured: no answer in 500ms"},
			{Provider: p2, Check: auction.CheckRTT, Reason: "rtt not measured: protocols not supported"},
		}
		if res.Lease.Provider != p3 || !reflect.DeepEqual(res.Explain.NotAdmitted, want) {
			t.Errorf("leased to %s, not admitted %+v; want %s and %+v", res.Lease.Provider, res.Explain.NotAdmitted, p3, want)
		}

		res, err = a.Auction(context.Background(), request(t, "job-2", testSpec()))
		if err != nil {
			t.Fatal(err)
		}
		r1, q1 := rankedOf(res.Explain, p1), quoteOf(res.Explain, p1)
		if r1 == nil || r1.RTT != 30*time.Millisecond || r1.RTTSource != RTTPeerstore ||
			q1.RTTSource != RTTPeerstore || q1.RTTError != "no answer in 500ms" {
			t.Errorf("without a limit: ranked %+v, quote %+v; want the peerstore's 30 ms and the probe's error", r1, q1)
		}
		if r2 := rankedOf(res.Explain, p2); r2 == nil || r2.RTTKnown || r2.RTTSource != "" || r2.Parts.RTT != 0 {
			t.Errorf("an unmeasured provider ranked %+v, want no RTT and no RTT credit", r2)
		}
	})
}

// The probe waits for as long as the spec's limit when that is longer
// than its own deadline, so that a provider the limit admits is measured.
func TestProbeWaitsForALongerLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMarket(t, Wall, 8, 1_000_000)
		slow := slowProber{d: 900 * time.Millisecond}
		res, err := m.auctioneer(t, WithProber(slow, 0)).Auction(context.Background(), request(t, "job-1", rttSpec(time.Second)))
		if err != nil {
			t.Fatalf("%v (not admitted %+v)", err, res.Explain.NotAdmitted)
		}
		if q := res.Explain.Quotes[0]; q.RTT != slow.d || q.RTTSource != RTTMeasured {
			t.Errorf("quote %+v, want 900 ms measured", q)
		}
	})
}

// slowProber answers after d, as a provider d away does.
type slowProber struct{ d time.Duration }

func (s slowProber) MeasureRTT(ctx context.Context, _ string) (time.Duration, error) {
	select {
	case <-time.After(s.d):
		return s.d, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// A Prober that reports no time at all is not believed: an RTT of zero
// would take the whole RTT credit.
func TestZeroRTTIsNotBelieved(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000)
	p := m.providers[0].id
	res, err := m.auctioneer(t, WithProber(fakeProber{rtt: map[string]time.Duration{p: 0}}, 0)).Auction(context.Background(), request(t, "job-1", testSpec()))
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Explain.Quotes[0]; q.RTTSource != "" || q.RTTError != "the probe measured no time" || res.Explain.Ranked[0].Parts.RTT != 0 {
		t.Errorf("quote %+v, rtt part %v; want the zero refused", q, res.Explain.Ranked[0].Parts.RTT)
	}
}

// Before quoting, with a Prober, the peerstore's average rejects only a
// provider remembered as far beyond the limit: one whose average is a
// little over it (the DHT's requests inflate it) is asked, measured near,
// and wins; one remembered at three times the limit is not asked at all.
func TestPeerstoreRTTDoesNotShutOutAProbedProvider(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_200_000)
	p1, p2 := m.providers[0].id, m.providers[1].id
	m.trust.rtt[p1], m.trust.rtt[p2] = 150*time.Millisecond, 300*time.Millisecond
	pr := fakeProber{rtt: map[string]time.Duration{p1: 20 * time.Millisecond, p2: 20 * time.Millisecond}}
	res, err := m.auctioneer(t, WithProber(pr, 0)).Auction(context.Background(), request(t, "job-1", rttSpec(100*time.Millisecond)))
	if err != nil {
		t.Fatalf("%v (rejected %+v)", err, res.Explain.Rejected)
	}
	if res.Lease.Provider != p1 {
		t.Errorf("leased to %s, want %s (150 ms remembered, 20 ms measured)", res.Lease.Provider, p1)
	}
	want := []auction.Rejection{{Provider: p2, Check: auction.CheckRTT, Reason: auction.ReasonRTT}}
	if !slices.EqualFunc(res.Explain.Rejected, want, sameRejection) || quoteOf(res.Explain, p2).Provider != "" {
		t.Errorf("rejected before quoting %+v, quotes %+v; want only %s (300 ms remembered, 3x the limit), never asked", res.Explain.Rejected, res.Explain.Quotes, p2)
	}
}

// sameRejection compares what Feasible decides, not the words Diagnose
// adds for `job explain`.
func sameRejection(a, b auction.Rejection) bool {
	return a.Provider == b.Provider && a.Check == b.Check && a.Reason == b.Reason
}
