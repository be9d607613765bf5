package renter

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// quoteSpy counts the quotes sent, and what Ready had seen by the award.
type quoteSpy struct {
	Transport
	mu     sync.Mutex
	quotes int
	awards int
}

func (s *quoteSpy) Quote(ctx context.Context, provider, jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	s.mu.Lock()
	s.quotes++
	s.mu.Unlock()
	return s.Transport.Quote(ctx, provider, jobID, nonce, specYAML)
}

func (s *quoteSpy) Award(ctx context.Context, provider string, proposal []byte) ([]byte, string, error) {
	s.mu.Lock()
	s.awards++
	s.mu.Unlock()
	return s.Transport.Award(ctx, provider, proposal)
}

func (s *quoteSpy) counts() (quotes, awards int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quotes, s.awards
}

// A round asks for quotes while the job's record is being committed, and
// awards only once Ready says it is: Ready is called after every quote
// was asked and before any award left.
func TestRoundAwardsOnlyOnceTheJobIsReady(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_100_000, 1_200_000)
	spy := &quoteSpy{Transport: fakeTransport{net: m.net, from: m.renter.Peer}}
	a, _ := m.releasingAuctioneer(t, spy)
	req := request(t, "job-1", testSpec())
	var atReady [2]int
	calls := 0
	req.Ready = func(context.Context) error {
		calls++
		atReady[0], atReady[1] = spy.counts()
		return nil
	}
	res, err := a.Auction(context.Background(), req)
	if err != nil || res.Lease == nil {
		t.Fatalf("auction: %v", err)
	}
	if calls != 1 || atReady != [2]int{3, 0} {
		t.Fatalf("Ready called %d times, with %d quotes asked and %d awards sent; want once, after 3 quotes, before any award",
			calls, atReady[0], atReady[1])
	}
}

// A job whose record could not be committed gets no lease: no award is
// sent, every quote's hold is released, and the round returns the error
// (not a no-match, which Place would retry).
func TestRoundWhoseJobIsNotRecordedAwardsNothing(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 8, 1_000_000, 1_100_000, 1_200_000)
	spy := &quoteSpy{Transport: fakeTransport{net: m.net, from: m.renter.Peer}}
	a, rel := m.releasingAuctioneer(t, spy)
	disk := errors.New("node.db: no space left on device")
	req := request(t, "job-1", testSpec())
	req.Ready = func(context.Context) error { return disk }
	_, err := a.Place(context.Background(), req, Policy{MaxReauctions: 3})
	if !errors.Is(err, disk) || !strings.Contains(err.Error(), "job-1") {
		t.Fatalf("place: %v, want the record's error naming the job", err)
	}
	var nm *NoMatchError
	if errors.As(err, &nm) {
		t.Fatalf("place: %v is a no-match, which would be retried", err)
	}
	if _, awards := spy.counts(); awards != 0 {
		t.Fatalf("%d awards sent for a job not recorded", awards)
	}
	want := sortedIDs(m.providers[0], m.providers[1], m.providers[2])
	if got := rel.providers(); !slices.Equal(got, want) {
		t.Fatalf("released %v, want every quoted provider %v", got, want)
	}
}
