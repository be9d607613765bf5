package renter

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// A job array's next shard, placed the moment its sibling exits, goes on
// the GPU that sibling freed, in the same round, though the book has not
// caught up: there the freed provider's offer still shows its GPU held by
// the sibling's bronze lease, and the other's shows its GPU idle, which
// another job took since. Through the raw book the round asks only the
// offer that looks idle (preferUndisturbed), is declined and finds no
// match (Place would then wait for the book: issue 36's makespan); through
// the renter's own view, which knows its sibling's lease ended, it leases
// the freed GPU.
func TestOwnViewPlacesOnTheGPUASiblingFreed(t *testing.T) {
	clock := newManualClock(t0)
	m := newMarket(t, clock, 1, 1_000_000, 1_100_000)
	full, freed := m.providers[0], m.providers[1]
	full.used["gpu0"] = "another-renters-job" // taken since its offer was issued
	sibling := &auction.Lease{JobID: "arr-s0", Network: testNetwork, Renter: m.renter.Peer, Provider: freed.id,
		Tier: auction.Bronze, GPUs: 1, Start: freed.offer.IssuedAt - 60, End: t0.Add(time.Hour).Unix()}
	freed.offer.Bronze = []auction.Booking{{Start: freed.offer.IssuedAt, End: sibling.End, GPUs: 1}} // what it last published
	for _, p := range m.providers {
		if err := p.offer.Validate(); err != nil {
			t.Fatal(err)
		}
	}

	_, err := m.auctioneer(t).Auction(context.Background(), request(t, "arr-s1", testSpec()))
	if !errors.Is(err, ErrNoMatch) {
		t.Fatalf("through the raw book: %v; want no match (the test's stale book is not stale)", err)
	}

	// The sibling was leased while the book held an offer from before it,
	// which the view corrects until the provider's next offer shows it.
	before := *freed.offer
	before.Seq, before.Bronze = 0, nil
	view := NewOwnView(fakeBook{full.offer, &before}, func() time.Time { return t0 })
	view.Took(sibling)
	if got := auction.FreeNow(offerOf(view, freed.id), t0); got != 0 {
		t.Fatalf("with the sibling just leased the view shows %d GPUs free, want 0", got)
	}
	view.book = m.book()
	if got := offerOf(view, freed.id); got != freed.offer {
		t.Fatalf("the offer that shows the sibling's lease is still corrected: %+v", got.Bronze)
	}
	view.Freed(sibling) // the renter saw its exit
	if got := auction.FreeNow(offerOf(view, freed.id), t0); got != 1 {
		t.Fatalf("after the sibling's exit the view shows %d GPUs free, want 1", got)
	}
	if len(freed.offer.Bronze) != 1 {
		t.Fatal("the view changed the book's offer")
	}
	a, err := New(m.renter, fakeTransport{net: m.net, from: m.renter.Peer}, view, WithClock(m.clock), WithTrust(m.trust))
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Auction(context.Background(), request(t, "arr-s1", testSpec()))
	if err != nil {
		t.Fatalf("through the renter's view: %v (quotes %+v)", err, res.Explain.Quotes)
	}
	if res.Lease.Provider != freed.id {
		t.Fatalf("leased %s, want the provider the sibling freed %s", res.Lease.Provider, freed.id)
	}

	// The provider's next offer, issued after the exit, is taken as it is.
	next := *freed.offer
	next.Seq, next.IssuedAt, next.Bronze = next.Seq+1, t0.Unix()+1, []auction.Booking{{Start: t0.Unix(), End: t0.Add(time.Hour).Unix(), GPUs: 1}}
	m.providers[1].offer = &next
	view.book = m.book()
	if got := offerOf(view, freed.id); got != &next {
		t.Fatalf("the view still corrects the provider's newer offer: %+v", got.Bronze)
	}
}

// A run the view was never told was leased (this node restarted since)
// frees nothing: its provider's offer stays as published.
func TestOwnViewFreesOnlyWhatItTook(t *testing.T) {
	m := newMarket(t, newManualClock(t0), 1, 1_000_000)
	p := m.providers[0]
	l := &auction.Lease{JobID: "arr-s0", Provider: p.id, Tier: auction.Bronze, GPUs: 1, Start: p.offer.IssuedAt, End: t0.Add(time.Hour).Unix()}
	p.offer.Bronze = []auction.Booking{{Start: l.Start, End: l.End, GPUs: 1}}
	view := NewOwnView(m.book(), func() time.Time { return t0 })
	view.Freed(l)
	if got := offerOf(view, p.id); got != p.offer {
		t.Fatalf("a lease never taken through the view freed GPUs: %+v", got.Bronze)
	}
}

func TestApplyBookings(t *testing.T) {
	held := []auction.Booking{{Start: 0, End: 100, GPUs: 2}, {Start: 100, End: 200, GPUs: 1}}
	for _, c := range []struct {
		name  string
		delta []auction.Booking
		want  []auction.Booking
	}{
		{"freed from now", []auction.Booking{{Start: 50, End: 200, GPUs: -1}},
			[]auction.Booking{{Start: 0, End: 50, GPUs: 2}, {Start: 50, End: 100, GPUs: 1}}},
		{"taken past the end", []auction.Booking{{Start: 50, End: 300, GPUs: 2}},
			[]auction.Booking{{Start: 0, End: 50, GPUs: 2}, {Start: 50, End: 200, GPUs: 3}, {Start: 200, End: 300, GPUs: 2}}},
		{"never below none", []auction.Booking{{Start: 0, End: 300, GPUs: -4}},
			[]auction.Booking{{Start: 0, End: 50, GPUs: 2}}},
	} {
		if got := applyBookings(held, c.delta, 3, 50); !slices.Equal(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func offerOf(v *OwnView, provider string) *auction.Offer {
	for _, o := range v.Snapshot() {
		if o.Provider == provider {
			return o
		}
	}
	return nil
}
