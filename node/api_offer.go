package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// OfferView is an offer as the API shows it: prices in micro-credits
// (auction.Credits) per GPU-hour, durations in seconds, simulated GPUs
// plainly marked.
type OfferView struct {
	Provider      string                     `json:"provider"`
	Seq           uint64                     `json:"seq"`
	CID           string                     `json:"cid"`
	GPUs          []auction.GPU              `json:"gpus"`
	GPUCount      int                        `json:"gpu_count"`
	Simulated     bool                       `json:"simulated"`
	Region        auction.Region             `json:"region"`
	Prices        map[string]auction.Credits `json:"prices" doc:"the owner's base floor per tier offered: micro-credits (auction.Credits; 1 credit = 1000000) per GPU-hour"`
	InEffect      map[string]PriceView       `json:"in_effect" doc:"per tier offered, the price in effect now (or over the job window market_offers names): the base floor raised by any price period in force, with the surge the offer's bookings imply; what price.TIER queries compare"`
	AvailableForS int64                      `json:"available_for_s"`
	NextFree      *FreeWindowView            `json:"next_free,omitempty" doc:"the next window with a GPU inside the windows and not booked; absent when there is none (the query field free is its length)"`
	Booked        []auction.Booking          `json:"booked,omitempty" doc:"GPUs that silver and gold leases hold, per span (unix seconds)"`
	Windows       []auction.Window           `json:"windows"`
	Pricing       *auction.Pricing           `json:"pricing,omitempty" doc:"price periods (multipliers in basis points: 10000 = 1x) and surge; absent = the floors at every hour, no surge"`
	Policy        auction.Policy             `json:"policy"`
	Host          auction.Host               `json:"host"`
	Datasets      []string                   `json:"datasets,omitempty"`
	IssuedAt      time.Time                  `json:"issued_at"`
	ExpiresAt     time.Time                  `json:"expires_at"`
}

// PriceView is one tier's price in effect, with why in words relative to
// now ("peak x2 until 18:00 UTC"; "" when it is the base floor).
type PriceView struct {
	auction.PriceInEffect
	Why string `json:"why,omitempty"`
}

func viewOffer(o *auction.Offer, now time.Time) OfferView {
	return viewOfferAt(o, now, now, 0)
}

// viewOfferAt is viewOffer with prices in effect over [start, start+dur).
func viewOfferAt(o *auction.Offer, now, start time.Time, dur time.Duration) OfferView {
	v := OfferView{
		Provider: o.Provider, Seq: o.Seq, CID: o.CID().String(), GPUs: o.GPUs, GPUCount: len(o.GPUs),
		Region: o.Region, Prices: map[string]auction.Credits{}, Windows: o.Windows, Pricing: o.Pricing, Policy: o.Policy, Host: o.Host,
		Datasets:      o.Datasets,
		AvailableForS: int64(auction.AvailableFor(o.Windows, now) / time.Second),
		NextFree:      viewFreeWindow(o, now),
		Booked:        o.Booked,
		IssuedAt:      time.Unix(o.IssuedAt, 0).UTC(),
		ExpiresAt:     time.Unix(o.ExpiresAt, 0).UTC(),
	}
	for _, g := range o.GPUs {
		v.Simulated = v.Simulated || g.Simulated
	}
	v.InEffect = map[string]PriceView{}
	for tier, c := range map[string]auction.Credits{"gold": o.Prices.Gold, "silver": o.Prices.Silver, "bronze": o.Prices.Bronze} {
		if c > 0 {
			v.Prices[tier] = c
			pe := o.PriceIn(auction.Tier(tier), start, dur)
			v.InEffect[tier] = PriceView{PriceInEffect: pe, Why: pe.Why(now)}
		}
	}
	return v
}

// FreeWindowView is an offer's next free window, for one GPU.
type FreeWindowView struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	InS   int64     `json:"in_s" doc:"seconds from now until it starts; 0: free now"`
	ForS  int64     `json:"for_s" doc:"its length in seconds"`
}

func viewFreeWindow(o *auction.Offer, now time.Time) *FreeWindowView {
	w, ok := auction.NextFreeWindow(o, 1, now)
	if !ok {
		return nil
	}
	return &FreeWindowView{Start: time.Unix(w.Start, 0).UTC(), End: time.Unix(w.End, 0).UTC(),
		InS: w.Start - now.Unix(), ForS: w.End - w.Start}
}

// GPUStatus is one local GPU and whether it is offered.
type GPUStatus struct {
	attest.GPU
	Offered   bool   `json:"offered"`
	Withdrawn string `json:"withdrawn,omitempty"`
	// Stopping: over the owner's hard limit, or faulty, every job on it
	// is stopped.
	Stopping string `json:"stopping,omitempty"`
	// Fault: the driver reported the GPU faulty (an Xid critical error,
	// a rise in uncorrected ECC errors); it stays withdrawn until the
	// owner clears it (offer_clear_fault) or the node restarts.
	Fault string `json:"fault,omitempty"`
	// Lease is the lease holding it now, if any: a GPU can be offered
	// and leased at once (the offer says which spans are booked).
	Lease *GPULease `json:"lease,omitempty"`
}

// GPULease is the lease on one GPU as the provider's scheduler holds it.
type GPULease struct {
	JobID  string       `json:"job_id"`
	Renter string       `json:"renter"`
	Tier   auction.Tier `json:"tier"`
	// State: awarded (GPUs held, not started), reserved (a gold lease
	// waiting for its window), running, paused (a voucher is late) or
	// ending (preempted, expiring or stopped, not yet released).
	State string          `json:"state"`
	Price auction.Credits `json:"price" doc:"micro-credits (auction.Credits; 1 credit = 1000000) per GPU-hour"`
	Start time.Time       `json:"start"`
	Until time.Time       `json:"until" doc:"the lease's end: its job is stopped then"`
}

// gpuLeases maps each GPU index to the lease that holds it.
func (n *Node) gpuLeases(now time.Time) map[int]*GPULease {
	out := map[int]*GPULease{}
	if n.providerJobs == nil {
		return out
	}
	for _, in := range n.providerJobs.Leases(now) {
		state := "awarded"
		switch {
		case in.Ending != 0:
			state = "ending"
		case in.Paused:
			state = "paused"
		case in.Running:
			state = "running"
		case in.Lease.Tier == auction.Gold && now.Unix() < in.Lease.Start:
			state = "reserved"
		}
		gl := &GPULease{JobID: in.Lease.JobID, Renter: in.Lease.Renter, Tier: in.Lease.Tier, State: state, Price: in.Lease.Price,
			Start: time.Unix(in.Lease.Start, 0).UTC(), Until: time.Unix(in.Lease.End, 0).UTC()}
		for _, g := range in.GPUs {
			// A running lease shows over a reservation waiting on the same GPU.
			if cur, ok := out[g]; !ok || cur.State == "reserved" || cur.State == "awarded" {
				out[g] = gl
			}
		}
	}
	return out
}

// OfferShowResult is offer_show's result.
type OfferShowResult struct {
	Offered  bool            `json:"offered"`
	Reason   string          `json:"reason,omitempty"`
	Offer    *OfferView      `json:"offer,omitempty"`
	Settings offers.Settings `json:"settings"`
	GPUs     []GPUStatus     `json:"gpus"`
	GPUError string          `json:"gpu_error,omitempty"`
	// Week is the settings' prices for the seven days from today, hour
	// by hour in the calendar's zone, whether or not anything is offered.
	Week *auction.PriceWeek `json:"week,omitempty"`
}

type offerAPI struct{ n *Node }

func registerOfferAPI(s *rpc.Server, n *Node) {
	a := offerAPI{n}
	rpc.Register(s, "offer_show", rpc.MethodDoc{
		Summary: "This node's offer: whether it is offered (and if not, why), the signed offer, the owner's settings and each GPU's state.",
	}, a.Show)
	rpc.Register(s, "offer_set", rpc.MethodDoc{
		Summary:     "Change the offer's settings; only the fields given change. Takes effect at once.",
		Description: "Prices are decimal credits per GPU-hour as strings (\"0.45\"); durations like \"12h\"; region \"eu/DE\". A bad value is an invalid-params error naming the field.",
	}, a.Set)
	rpc.Register(s, "offer_pause", rpc.MethodDoc{Summary: "Withdraw the offer (published as a signed withdrawal) until offer_resume."}, a.Pause)
	rpc.Register(s, "offer_resume", rpc.MethodDoc{Summary: "Offer again after offer_pause."}, a.Resume)
	rpc.Register(s, "offer_clear_fault", rpc.MethodDoc{
		Summary: "Offer a GPU that faulted (an Xid critical error, a rise in uncorrected ECC errors) again without restarting the node, once its owner has inspected it.",
		Description: "The GPU is offered again from the monitor's next poll, which the call asks for at once, unless a new fault arrives (another Xid, a further ECC rise). " +
			"The call waits up to a few seconds for that poll and returns the GPU's state then. Errors: -32050 no GPU with that index, -32051 the GPU is not faulted.",
		Errors: []*rpc.Error{{Code: CodeNoSuchGPU, Message: "no GPU with that index"}, {Code: CodeGPUNotFaulted, Message: "the GPU is not faulted"}},
	}, a.ClearFault)
}

// offer_clear_fault's errors.
const (
	CodeNoSuchGPU     = -32050 // no GPU of this node has that index
	CodeGPUNotFaulted = -32051 // the GPU has no fault to clear
)

// ClearFaultParams names the GPU by its index (offer_show's gpus[].index).
type ClearFaultParams struct {
	GPU *int `json:"gpu" doc:"the GPU's index, as offer_show lists it"`
}

// Validate requires the index.
func (p ClearFaultParams) Validate() error {
	if p.GPU == nil {
		return errors.New("gpu: required (the GPU's index, as offer_show lists it)")
	}
	if *p.GPU < 0 {
		return fmt.Errorf("gpu: %d is not an index", *p.GPU)
	}
	return nil
}

// ClearFaultResult is offer_clear_fault's result.
type ClearFaultResult struct {
	GPU     int    `json:"gpu"`
	Cleared string `json:"cleared" doc:"the fault that was cleared"`
	// Status is the GPU's state once the monitor has polled after the
	// clear (or when the wait ran out): offered again, or faulted anew.
	Status *GPUStatus `json:"status,omitempty" doc:"the GPU's state after the monitor's next poll (or when the short wait ran out); fault set again means a new fault arrived"`
	Polled bool       `json:"polled" doc:"whether the monitor's poll after the clear was seen; false: status is from before it"`
}

// clearFaultWait bounds how long offer_clear_fault waits for the poll it
// asked for to reach the offer.
const clearFaultWait = 5 * time.Second

func (a offerAPI) ClearFault(ctx context.Context, p ClearFaultParams) (ClearFaultResult, error) {
	mon := a.n.gpuMon
	if mon == nil {
		return ClearFaultResult{}, &rpc.Error{Code: CodeNoSuchGPU, Message: "this node has no GPUs to sell"}
	}
	idx := *p.GPU
	before := a.n.provider.Availability()
	cleared, err := mon.ClearFault(idx)
	switch {
	case errors.Is(err, attest.ErrNoSuchGPU):
		return ClearFaultResult{}, &rpc.Error{Code: CodeNoSuchGPU, Message: fmt.Sprintf("no GPU %d on this node (offer show lists them)", idx)}
	case errors.Is(err, attest.ErrNotFaulted):
		msg := fmt.Sprintf("GPU %d is not faulted: nothing to clear", idx)
		if w := before.Withdrawn[idx]; w != "" {
			msg += " (it is withdrawn because " + w + ")"
		}
		return ClearFaultResult{}, &rpc.Error{Code: CodeGPUNotFaulted, Message: msg}
	case err != nil:
		return ClearFaultResult{}, err
	}
	res := ClearFaultResult{GPU: idx, Cleared: cleared.Fault}
	// The monitor polls now and reports that poll to the provider: wait
	// for it to reach the availability the offer is built from.
	wctx, cancel := context.WithTimeout(ctx, clearFaultWait)
	defer cancel()
	res.Polled = pollUntil(wctx, 20*time.Millisecond, func() bool {
		return a.n.provider.Availability().Poll > cleared.AfterPoll
	})
	show, err := a.Show(ctx, struct{}{})
	if err != nil {
		return res, nil // cleared all the same; offer_show will say how it stands
	}
	for _, g := range show.GPUs {
		if g.Index == idx {
			res.Status = &g
		}
	}
	return res, nil
}

// pollUntil calls done every interval until it returns true (true) or
// ctx ends (false).
func pollUntil(ctx context.Context, every time.Duration, done func() bool) bool {
	t := time.NewTicker(every)
	defer t.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

func (a offerAPI) Show(ctx context.Context, _ struct{}) (OfferShowResult, error) {
	p := a.n.provider.Status()
	res := OfferShowResult{Offered: p.Current != nil, Settings: p.Settings, GPUs: []GPUStatus{}}
	if p.Current != nil {
		v := viewOffer(p.Current, time.Now())
		res.Offer = &v
	} else {
		res.Reason = p.Reason
	}
	if p.GPUErr != nil {
		res.GPUError = p.GPUErr.Error()
	}
	if w, err := auction.WeekPrices(&p.Settings.Calendar, p.Settings.Prices, p.Settings.OfferPricing(), time.Now()); err == nil {
		res.Week = &w
	}
	res.GPUs = gpuStatuses(p.Availability, res.Offered, a.n.gpuLeases(time.Now()))
	return res, nil
}

// gpuStatuses is each inventoried GPU's state. Availability's sets and
// the leases are keyed by the GPU's index (attest.GPU.Index), which need
// not be its position in the inventory: NVML's indexes skip a GPU it
// cannot read, and a simulated inventory may start anywhere.
func gpuStatuses(av attest.Availability, offered bool, leases map[int]*GPULease) []GPUStatus {
	available := map[int]bool{}
	for _, i := range av.Available {
		available[i] = true
	}
	out := make([]GPUStatus, 0, len(av.Inventory.GPUs))
	for _, g := range av.Inventory.GPUs {
		out = append(out, GPUStatus{GPU: g, Offered: available[g.Index] && offered, Withdrawn: av.Withdrawn[g.Index], Stopping: av.Stop[g.Index],
			Fault: av.Faults[g.Index], Lease: leases[g.Index]})
	}
	return out
}

func (a offerAPI) Set(ctx context.Context, patch offers.Patch) (OfferShowResult, error) {
	if _, err := a.n.provider.Update(patch.Apply); err != nil {
		return OfferShowResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: err.Error()}
	}
	return a.settled(ctx)
}

func (a offerAPI) Pause(ctx context.Context, _ struct{}) (OfferShowResult, error) {
	if _, err := a.n.provider.Update(func(s offers.Settings) (offers.Settings, error) { s.Paused = true; return s, nil }); err != nil {
		return OfferShowResult{}, err
	}
	return a.settled(ctx)
}

func (a offerAPI) Resume(ctx context.Context, _ struct{}) (OfferShowResult, error) {
	if _, err := a.n.provider.Update(func(s offers.Settings) (offers.Settings, error) { s.Paused = false; return s, nil }); err != nil {
		return OfferShowResult{}, err
	}
	return a.settled(ctx)
}

// settled publishes synchronously so that the answer shows the new state.
func (a offerAPI) settled(ctx context.Context) (OfferShowResult, error) {
	if err := a.n.provider.Publish(ctx); err != nil {
		return OfferShowResult{}, err
	}
	return a.Show(ctx, struct{}{})
}
