package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Auction parameters. K bounds the work a renter asks of the market per
// round; the deadline bounds how long a slow provider can hold it up.
const (
	quoteCandidates = 5
	quoteDeadline   = 3 * time.Second
	// DefaultBillingInterval is how often a renter pays (Options.BillingInterval).
	DefaultBillingInterval = 5 * time.Minute
)

// JobExplain records why the auction came out as it did: the funnel of
// feasibility checks, every quote's outcome, the ranking and the clearing.
type JobExplain struct {
	Considered    int                  `json:"considered"`
	Funnel        []auction.FunnelStep `json:"funnel"`
	Rejected      []auction.Rejection  `json:"rejected,omitempty"` // first 100
	Quotes        []QuoteOutcome       `json:"quotes"`
	Ranked        []auction.Ranked     `json:"ranked,omitempty"`
	Winner        string               `json:"winner,omitempty"`
	ClearingPrice auction.Credits      `json:"clearing,omitempty" doc:"micro-credits (auction.Credits; 1 credit = 1000000) per GPU-hour"`
}

// QuoteOutcome is one provider's answer to the request for quotes.
type QuoteOutcome struct {
	Provider string          `json:"provider"`
	Bid      auction.Credits `json:"bid_price,omitempty" doc:"micro-credits (auction.Credits; 1 credit = 1000000) per GPU-hour"`
	Declined string          `json:"declined,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// run is one job's life on the renter's side: auction, lease, run, and
// again, up to the spec's max_reauctions, when the provider is lost, the
// job is preempted (resuming from the checkpoint it shipped back) or it
// exits with a code the spec marks for retry.
func (r *renterJobs) run(id string, spec *auction.JobSpec, specYAML []byte, secrets map[string]string) {
	exclude := map[string]bool{}
	var ckpt []byte
	rec, err := r.get(id)
	if err != nil {
		return
	}
	if specYAML, err = forProvider(spec, specYAML); err != nil {
		r.fail(id, err)
		return
	}
	if rec.Group != "" {
		// Decided once the last replica ends, whichever that is.
		defer r.compareReplicas(rec.Group)
	}
	if rec.Canary {
		defer r.canary.finished(rec.Pin)
	}
	races := 0
	for attempt := 0; ; attempt++ {
		lease, raw, ex, release, err := r.auctionReplica(id, rec, spec, specYAML, exclude)
		if errors.Is(err, errRaced) && races < maxRaceRounds && r.bg.Err() == nil {
			races++
			attempt--
			if !sleepCtx(r.bg, time.Duration(20+mrand.IntN(80*races))*time.Millisecond) {
				return
			}
			continue
		}
		races = 0
		if err != nil {
			if r.bg.Err() != nil {
				return // stopping: not the market's fault; the next start fails the job
			}
			if errors.Is(err, errNoMatch) && attempt < spec.Retry.MaxReauctions && r.bg.Err() == nil {
				wait := min(time.Duration(1<<min(attempt, 5))*time.Second, 30*time.Second)
				r.update(id, fmt.Sprintf("%v; retrying in %s (%d of %d)", err, wait, attempt+1, spec.Retry.MaxReauctions),
					func(j *JobRecord) { j.State, j.Explain = StateAuction, ex })
				if !sleepCtx(r.bg, wait) {
					return // stopping: the next start fails the job, as any caught in its auction
				}
				continue
			}
			state := StateFailed
			if errors.Is(err, errNoMatch) {
				state = StateNoMatch
			}
			r.update(id, err.Error(), func(j *JobRecord) { j.State, j.Error, j.Explain = state, err.Error(), ex })
			return
		}
		cid := leaseCID(raw)
		_ = r.journal.enqueue(ledger.TypeLease, raw) // before the outcome: one ordered queue
		r.update(id, fmt.Sprintf("provider %s, %s credits per GPU-hour", lease.Provider, auction.FormatCredits(lease.Price)), func(j *JobRecord) {
			if j.State == StateCancelled {
				return
			}
			j.State, j.Explain, j.Lease, j.Provider = StateLeased, ex, raw, lease.Provider
			j.LeaseCID, j.Price = cid, lease.Price
			j.Simulated = offerSimulated(r.m, lease.Provider)
			j.Attempts = attempt + 1
		})
		release() // siblings now see this replica's provider
		if !rec.Canary {
			r.maybeCanary(lease.Provider)
		}
		out := r.follow1(id, spec, lease, raw, specYAML, secrets, ckpt)
		if r.bg.Err() != nil {
			return // this node is stopping: the record stays leased and is followed again after a restart
		}
		var voucher []byte
		if j, err := r.get(id); err == nil {
			voucher = j.LastVoucher
		}
		r.recordOutcome(cid, lease.Provider, out, voucher)
		out = r.checkAnswer(id, spec, cid, lease.Provider, out)
		if out.state != "" {
			r.update(id, out.why, func(j *JobRecord) {
				if j.State != StateCancelled {
					j.State, j.Error = out.state, out.why
				}
			})
			return
		}
		if j, _ := r.get(id); j != nil && j.State == StateCancelled {
			return
		}
		if attempt >= spec.Retry.MaxReauctions {
			r.update(id, out.why, func(j *JobRecord) {
				j.State, j.Error = StateFailed, out.why+fmt.Sprintf(" (no re-auctions left of %d)", spec.Retry.MaxReauctions)
			})
			return
		}
		if len(out.checkpoint) > 0 {
			ckpt = out.checkpoint
		}
		exclude[lease.Provider] = true
		r.update(id, out.why+"; auctioning again", func(j *JobRecord) { j.State = StateAuction })
	}
}

var errNoMatch = errors.New("no provider matched")

// errRaced: every award was refused because concurrent awards took the
// GPUs the bids named. Capacity may well be free, so the renter asks for
// quotes again at once (a few times, with jitter) rather than giving up
// or spending a re-auction.
var errRaced = errors.New("lost the race for the GPUs")

// maxRaceRounds bounds those immediate rounds per attempt.
const maxRaceRounds = 8

// auctionReplica runs one auction for job id. For a replica it holds the
// group's lock and excludes the siblings' providers; release lets the
// next sibling go once the winner is on record (call it exactly once).
func (r *renterJobs) auctionReplica(id string, rec *JobRecord, spec *auction.JobSpec, specYAML []byte, exclude map[string]bool) (*auction.Lease, []byte, *JobExplain, func(), error) {
	release := func() {}
	if rec.Group != "" {
		mu := r.groupLock(rec.Group)
		mu.Lock()
		var once sync.Once
		release = func() { once.Do(mu.Unlock) }
		for _, sib := range r.siblings(rec.Group) {
			if sib.ID != id && sib.Provider != "" {
				exclude[sib.Provider] = true
			}
		}
	}
	lease, raw, ex, err := r.auction(id, spec, specYAML, exclude, rec.Pin)
	if err != nil {
		release()
	}
	return lease, raw, ex, release, err
}

// auction filters the book, asks the best candidates for quotes, ranks the
// signed bids, clears at the second score and gets the winner to
// counter-sign; if the winner refuses, the next one gets the award.
func (r *renterJobs) auction(id string, spec *auction.JobSpec, specYAML []byte, exclude map[string]bool, pin string) (*auction.Lease, []byte, *JobExplain, error) {
	now := time.Now()
	env := auction.Env{Now: now, RTT: r.rtt, Reputation: r.rep}
	var book []*auction.Offer
	for _, o := range r.m.book.Snapshot() {
		if pin != "" && o.Provider != pin {
			continue
		}
		// Not providers that lost or preempted this job, nor any that an
		// objective fraud proof convicts.
		if !exclude[o.Provider] && (r.claims == nil || !r.claims.convicted(o.Provider)) {
			book = append(book, o)
		}
	}
	ok, rejected := auction.Feasible(spec, book, env)
	ex := &JobExplain{Considered: len(book), Funnel: auction.Funnel(rejected), Quotes: []QuoteOutcome{}}
	ex.Rejected = rejected[:min(len(rejected), 100)]
	if len(ok) == 0 {
		return nil, nil, ex, fmt.Errorf("%w: %d offers known, none feasible (see `gleaner job explain %s`)", errNoMatch, len(book), id)
	}
	sort.SliceStable(ok, func(a, b int) bool { return tierFloor(ok[a], spec.Tier) < tierFloor(ok[b], spec.Tier) })
	cands := ok[:min(len(ok), quoteCandidates)]
	nonce := randomNonce()
	sent, err := sentSpec(specYAML)
	if err != nil {
		return nil, nil, ex, err
	}
	bids, outcomes := r.requestQuotes(id, nonce, specYAML, sent, cands)
	ex.Quotes = outcomes
	offers := map[string]*auction.Offer{}
	for _, o := range cands {
		offers[o.Provider] = o
	}
	var plain []auction.Bid
	rawBid := map[string][]byte{}
	for _, b := range bids {
		plain = append(plain, b.bid)
		rawBid[b.bid.Provider] = b.raw
	}
	admitted, _ := auction.AdmitBids(spec, plain, offers, env)
	ranked := auction.Rank(spec, admitted, offers, env)
	ex.Ranked = ranked
	raced := false
	for len(ranked) > 0 {
		winner, price, ok := auction.Clear(ranked, spec.MaxPrice)
		if !ok {
			break
		}
		ex.Winner, ex.ClearingPrice = winner.Bid.Provider, price
		lease, raw, err := r.award(id, spec, winner, price, rawBid[winner.Bid.Provider])
		if err == nil {
			return lease, raw, ex, nil
		}
		ex.Quotes = append(ex.Quotes, QuoteOutcome{Provider: winner.Bid.Provider, Error: "award refused: " + err.Error()})
		raced = raced || err.Error() == refusedRaced
		ranked = dropProvider(ranked, winner.Bid.Provider)
	}
	if raced {
		return nil, nil, ex, fmt.Errorf("%w: %w: other awards took the GPUs our bids named", errNoMatch, errRaced)
	}
	return nil, nil, ex, fmt.Errorf("%w: %d feasible offers, no acceptable bid (see `gleaner job explain %s`)", errNoMatch, len(ok), id)
}

// quotedSpec is the spec as the providers read it (the bytes sent, parsed
// as they parse them) and its SpecHash.
type quotedSpec struct {
	spec *auction.JobSpec
	hash []byte
}

func sentSpec(specYAML []byte) (quotedSpec, error) {
	spec, err := auction.ParseJobSpec(specYAML)
	if err != nil {
		return quotedSpec{}, fmt.Errorf("the spec sent to providers: %w", err)
	}
	hash, err := auction.SpecHash(spec)
	return quotedSpec{spec, hash}, err
}

// check refuses a bid for another spec, or whose window would not run the
// job as asked: shorter than duration.max, or a reservation at another
// time.
func (q quotedSpec) check(b *auction.Bid) error {
	switch {
	case !bytes.Equal(b.SpecHash, q.hash):
		return errors.New("the bid names another job spec than the one we sent")
	case b.DurationSec < int64(q.spec.Duration.Max/time.Second):
		return fmt.Errorf("the bid's window of %d s is shorter than duration.max", b.DurationSec)
	case q.spec.Tier == auction.Gold && b.Start != q.spec.Start.Unix():
		return errors.New("the bid reserves another start than the spec's")
	}
	return nil
}

type signedBid struct {
	bid auction.Bid
	raw []byte
}

// requestQuotes asks every candidate at once and waits at most
// quoteDeadline; silence is recorded as an error, never waited out.
func (r *renterJobs) requestQuotes(id string, nonce, specYAML []byte, sent quotedSpec, cands []*auction.Offer) ([]signedBid, []QuoteOutcome) {
	ctx, cancel := context.WithTimeout(r.bg, quoteDeadline)
	defer cancel()
	var mu sync.Mutex
	var bids []signedBid
	outcomes := make([]QuoteOutcome, len(cands))
	var wg sync.WaitGroup
	for i, o := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := QuoteOutcome{Provider: o.Provider}
			var rep quoteReply
			err := r.exchange(ctx, o.Provider, quoteProto, quoteRequest{JobID: id, Nonce: nonce, Spec: specYAML}, &rep)
			switch {
			case err != nil:
				out.Error = err.Error()
			case rep.Decline != "":
				out.Declined = rep.Decline
			default:
				b, _, err := auction.DecodeSignedBid(rep.Bid, time.Now())
				if err == nil && (b.Provider != o.Provider || b.JobID != id || !bytes.Equal(b.Nonce, nonce)) {
					err = errors.New("the bid is not for this job, round or provider")
				}
				if err == nil {
					err = sent.check(b)
				}
				if err != nil {
					out.Error = "bad bid: " + err.Error()
				} else {
					out.Bid = b.Price
					mu.Lock()
					bids = append(bids, signedBid{*b, rep.Bid})
					mu.Unlock()
				}
			}
			outcomes[i] = out
		}()
	}
	wg.Wait()
	return bids, outcomes
}

// award signs the lease and asks the winner to counter-sign it.
func (r *renterJobs) award(id string, spec *auction.JobSpec, w auction.Ranked, price auction.Credits, bidRaw []byte) (*auction.Lease, []byte, error) {
	// The window and the notice are the provider's, as its bid states
	// them: it refuses a lease that changes them.
	l := &auction.Lease{
		JobID: id, Network: r.m.host.Network(), Renter: r.m.host.ID().String(), Provider: w.Bid.Provider,
		Tier: spec.Tier, Price: price, GPUs: spec.Resources.GPUs,
		Start: w.Bid.Start, End: w.Bid.Start + w.Bid.DurationSec,
		NoticeSec: w.Bid.NoticeSec, BillingSec: int64(r.billing / time.Second), Bid: bidRaw,
		GPUUUIDHash: w.Bid.GPUHashes, SpecHash: w.Bid.SpecHash,
	}
	sl, err := auction.ProposeLease(l, r.key)
	if err != nil {
		return nil, nil, err
	}
	prop, err := sl.Marshal()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(r.bg, 10*time.Second)
	defer cancel()
	var rep awardReply
	if err := r.exchange(ctx, w.Bid.Provider, awardProto, awardRequest{Lease: prop}, &rep); err != nil {
		return nil, nil, err
	}
	if rep.Refused != "" {
		return nil, nil, errors.New(rep.Refused)
	}
	got, gotSL, err := auction.DecodeSignedLease(rep.Lease, true)
	if err != nil {
		return nil, nil, err
	}
	if !bytes.Equal(gotSL.Body, sl.Body) {
		return nil, nil, errors.New("the provider counter-signed a different lease")
	}
	return got, rep.Lease, nil
}

// exchange sends one request on a fresh stream and reads one reply.
func (r *renterJobs) exchange(ctx context.Context, provider, proto string, req, rep any) error {
	pid, err := peer.Decode(provider)
	if err != nil {
		return err
	}
	s, err := r.m.host.LibP2P().NewStream(ctx, pid, r.m.host.ProtocolID(proto))
	if err != nil {
		return err
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := writeMsg(s, req); err != nil {
		return err
	}
	return readMsg(s, maxEventFrame, rep)
}

func tierFloor(o *auction.Offer, t auction.Tier) auction.Credits {
	switch t {
	case auction.Gold:
		return o.Prices.Gold
	case auction.Silver:
		return o.Prices.Silver
	}
	return o.Prices.Bronze
}

func dropProvider(rs []auction.Ranked, p string) []auction.Ranked {
	out := rs[:0:0]
	for _, r := range rs {
		if r.Bid.Provider != p {
			out = append(out, r)
		}
	}
	return out
}

func offerSimulated(m *market, provider string) bool {
	if o, _, ok := m.book.Get(provider); ok {
		for _, g := range o.GPUs {
			if g.Simulated {
				return true
			}
		}
	}
	return false
}

func peerRTT(m *market, provider string) (time.Duration, bool) {
	pid, err := peer.Decode(provider)
	if err != nil {
		return 0, false
	}
	d := m.host.LibP2P().Peerstore().LatencyEWMA(pid)
	return d, d > 0
}

func leaseCID(raw []byte) string {
	_, sl, err := auction.DecodeSignedLease(raw, true)
	if err != nil {
		return ""
	}
	return sl.CID().String()
}

// recordOutcome journals how the run ended, as the renter saw it: the
// evidence reputation is later computed from.
func (r *renterJobs) recordOutcome(leaseCID, provider string, out runEnd, voucher []byte) {
	if v, err := ledger.ReadVoucher(voucher); err != nil || v.Lease != leaseCID {
		voucher = nil // a run that ended before its first voucher cites none, not the last run's
	}
	payload, err := json.Marshal(ledger.Outcome{Lease: leaseCID, Provider: provider, Result: out.result, Detail: out.why, Voucher: voucher})
	if err == nil {
		_ = r.journal.enqueue(ledger.TypeOutcome, payload)
	}
}

// sleepCtx waits d or until ctx ends; false if ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
