package provider

import (
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// Desk answers a provider's side of the two market exchanges, /auction/1
// (a request for quotes) and /lease/1 (an award), over its Scheduler. It
// is what node's adapter and the market simulator both call, so that a
// simulated provider quotes and checks awards exactly as a real one does;
// persisting, journaling and launching stay with the caller.
type Desk struct {
	Engine  *auction.BidEngine
	Sched   *Scheduler
	Key     crypto.PrivKey // signs bids and counter-signs leases
	Self    string         // this provider's peer ID
	Network string
	// Parse reads a request's spec; nil is auction.ParseJobSpec. The
	// simulator passes a memo of it.
	Parse func([]byte) (*auction.JobSpec, error)
}

// MaxBillingSec bounds the interval a provider works before the next
// voucher is due: a renter cannot make it work an hour on credit.
const MaxBillingSec = 3600

// Quote answers a request for quotes for jobID from renter (the peer the
// transport authenticated) under its nonce with a signed bid's wire
// bytes, or a decline. offer is the provider's own current offer. The
// GPUs the bid names are held for the quote (Scheduler.PlanHeld) until its
// award, its release (Release) or DefaultQuoteHold; a quote that finds
// the free GPUs promised to other live quotes is declined with
// auction.ReasonHeld.
func (d *Desk) Quote(specYAML []byte, jobID, renter string, nonce []byte, offer *auction.Offer, now time.Time) ([]byte, string) {
	parse := d.Parse
	if parse == nil {
		parse = auction.ParseJobSpec
	}
	spec, err := parse(specYAML)
	if err != nil {
		return nil, "bad job spec: " + err.Error()
	}
	if offer == nil {
		return nil, "not offering right now"
	}
	// The owner's pricing, signed into the offer, sets the price: the
	// period in force over the job's window and a surge with utilisation
	// up to the owner's cap, never above the renter's max_price
	// (auction.BidEngine.Quote). Renters check the same floor, so what
	// they ask for is what is quoted; an offer without pricing quotes
	// its floors.
	// The surge follows the load when the job would run: a reservation
	// for next week is not dearer because the machine is busy today.
	loadAt := now
	if spec.Tier == auction.Gold && spec.Start.After(now) {
		loadAt = spec.Start
	}
	bid, decl := d.Engine.Quote(spec, offer, d.Sched.LoadAt(spec.Tier, loadAt, now), now)
	if decl != nil {
		return nil, decl.Reason
	}
	bid.JobID, bid.Nonce = jobID, nonce
	start := time.Unix(bid.Start, 0)
	plan, _, err := d.Sched.PlanHeld(Holder{Renter: renter, JobID: jobID, Nonce: nonce}, bid.GPUs, spec.Tier,
		Span{Start: start, End: start.Add(time.Duration(bid.DurationSec) * time.Second)}, now)
	if errors.Is(err, ErrHeld) {
		return nil, auction.ReasonHeld
	}
	if err != nil {
		return nil, auction.ReasonBusy
	}
	if bid.GPUHashes, err = d.Sched.Hashes(plan); err != nil {
		return nil, "GPU inventory changed; ask again"
	}
	sb, err := auction.SignBid(&bid, d.Key)
	if err != nil {
		return nil, "cannot sign bid: " + err.Error()
	}
	raw, err := sb.Marshal()
	if err != nil {
		return nil, err.Error()
	}
	return raw, ""
}

// Release ends the hold of renter's quote for jobID under nonce: the
// renter awarded another provider or gave the round up. Anyone else's
// release, or one with another round's nonce, does nothing; it reports
// whether a hold ended.
func (d *Desk) Release(jobID, renter string, nonce []byte, now time.Time) bool {
	return d.Sched.ReleaseHold(Holder{Renter: renter, JobID: jobID, Nonce: nonce}, now)
}

// Award is an award that passed the desk's checks: the proposed lease,
// its signed form (to counter-sign once the caller has decided on a held
// lease for the same job) and the scheduler's indexes of the GPUs its bid
// named (to Claim).
type Award struct {
	Lease  *auction.Lease
	Signed *auction.SignedLease
	GPUs   []int
}

// CheckAward checks an award sent by the peer from against the provider's
// own bid: the parties and network, the bid (ours, signed, still valid),
// the billing interval, and that the lease honours the bid in every term
// it fixes (HonoursBid), so a renter cannot run a spec it never quoted.
func (d *Desk) CheckAward(proposal []byte, from string, now time.Time) (*Award, error) {
	l, sl, err := auction.DecodeSignedLease(proposal, false)
	if err != nil {
		return nil, err
	}
	if l.Provider != d.Self || l.Renter != from || l.Network != d.Network {
		return nil, errors.New("the lease names other parties or another network")
	}
	bid, _, err := auction.DecodeSignedBid(l.Bid, now)
	if err != nil {
		return nil, fmt.Errorf("the lease's bid: %w", err)
	}
	if l.BillingSec > MaxBillingSec {
		return nil, fmt.Errorf("billing interval %d s: at most %d", l.BillingSec, MaxBillingSec)
	}
	if bid.Provider != d.Self {
		return nil, errors.New("the lease's bid is not ours")
	}
	if err := HonoursBid(l, bid, now); err != nil {
		return nil, err
	}
	want, err := d.Sched.Indexes(bid.GPUHashes)
	if err != nil {
		return nil, errors.New("the GPUs of our bid are no longer in this machine")
	}
	return &Award{Lease: l, Signed: sl, GPUs: want}, nil
}
