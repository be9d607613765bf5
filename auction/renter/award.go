package renter

import (
	"bytes"
	"context"
	"errors"

	"github.com/gleaner-net/gleaner/auction"
)

// errAwardDeadline is the cause of an award cut off by its deadline.
var errAwardDeadline = errors.New("no answer to the award before its deadline")

// proposal is the lease the renter offers the winner. The window, notice,
// GPUs and spec are the provider's, as its bid states them (it refuses a
// lease that changes them); the price is the clearing price and the
// billing interval the renter's.
func (a *Auctioneer) proposal(req Request, spec *auction.JobSpec, w auction.Ranked, price auction.Credits, bidRaw []byte) *auction.Lease {
	return &auction.Lease{
		JobID: req.JobID, Network: a.id.Network, Renter: a.id.Peer, Provider: w.Bid.Provider,
		Tier: spec.Tier, Price: price, GPUs: spec.Resources.GPUs,
		Start: w.Bid.Start, End: w.Bid.Start + w.Bid.DurationSec, NoticeSec: w.Bid.NoticeSec,
		BillingSec: req.BillingSec, Bid: bidRaw,
		GPUUUIDHash: w.Bid.GPUHashes, SpecHash: w.Bid.SpecHash,
	}
}

// award signs the lease and asks the winner to counter-sign it. It
// returns the lease only when what came back is the body proposed,
// co-signed by both; the outcome says what happened either way.
func (a *Auctioneer) award(ctx context.Context, req Request, spec *auction.JobSpec, w auction.Ranked, price auction.Credits, bidRaw []byte) (*auction.Lease, []byte, AwardOutcome) {
	out := AwardOutcome{Provider: w.Bid.Provider, Price: price}
	fail := func(err error) (*auction.Lease, []byte, AwardOutcome) {
		out.Error = err.Error()
		return nil, nil, out
	}
	sl, err := auction.ProposeLease(a.proposal(req, spec, w, price, bidRaw), a.id.Key)
	if err != nil {
		return fail(err)
	}
	prop, err := sl.Marshal()
	if err != nil {
		return fail(err)
	}
	actx, cancel := withTimeout(a.clock, ctx, a.awardWait, errAwardDeadline)
	defer cancel()
	cosigned, refusal, err := a.transport.Award(actx, w.Bid.Provider, prop)
	if cause := context.Cause(actx); err != nil && cause != nil {
		err = cause
	}
	switch {
	case err != nil:
		return fail(err)
	case refusal != "":
		out.Refused, out.Raced = refusal, refusal == RefusedRaced
		return nil, nil, out
	}
	got, gotSL, err := auction.DecodeSignedLease(cosigned, true)
	if err != nil {
		return fail(err)
	}
	if !bytes.Equal(gotSL.Body, sl.Body) {
		return fail(errors.New("the provider counter-signed a different lease"))
	}
	return got, cosigned, out
}
