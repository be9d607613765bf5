package renting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/metrics"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/peers"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
)

// DefaultBillingInterval is how often a renter pays (Options.BillingInterval).
const DefaultBillingInterval = 5 * time.Minute

// run is one job's life on the renter's side: auction, lease, run, and
// again while the job's lifecycle (renter.Lifecycle, the same code the
// market simulator runs) says so: a lost provider or a retryable exit
// spends one of the spec's max_reauctions; a preemption spends none and
// resumes from the checkpoint it shipped back, on any provider, the one
// that preempted it included; a run the provider could not start spends
// none, within bounds. This loop does the I/O the lifecycle decides.
// life is nil for a new job; a job that waited in a re-auction when this
// node restarted goes on with the lifecycle rebuilt from its record
// (wait.go), which this loop keeps current there.
func (r *Jobs) run(id string, spec *auction.JobSpec, specYAML []byte, secrets map[string]string, life *renter.Lifecycle) {
	defer func() { // the credentials live as long as the job's auctions, in memory only
		r.mu.Lock()
		delete(r.registryAuth, id)
		r.mu.Unlock()
	}()
	rec, err := r.Get(id)
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
	groupName := rec.Group
	if groupName == "" && rec.Service != "" {
		groupName = serviceGroup(rec.Service) // apart from each other, never compared
	}
	group := r.auctionGroup(groupName)
	if rec.Service != "" && group != nil {
		defer group.Release(id) // an ended replica keeps no provider from its successor
	}
	defer r.settled(id)
	if life == nil {
		life = renter.NewLifecycle(spec, rec.Pin)
		for _, p := range rec.Avoid {
			life.Avoid(p, "its service replica was lost with it")
		}
	}
	req := renter.Request{JobID: id, SpecYAML: specYAML, Spec: spec, Exclude: life.Exclude(), LastResort: life.LastResort(), Pin: rec.Pin, Group: group,
		BillingSec: int64(r.billing / time.Second)}
	for {
		// The auctioneer (auction/renter) runs the round and the
		// re-auction policy: immediate re-quotes after lost races,
		// backoff after no match, while re-auctions are left; a job sent
		// back first waits, spending nothing, for the book to catch up
		// (the lifecycle's Policy says how long).
		pol := life.Policy()
		if rec.Array != "" && pol.Patience == 0 {
			// A shard is most often placed the moment a sibling ended, on
			// the GPUs that sibling freed, which the book shows busy until
			// its provider republishes: the round waits for the book to
			// catch up rather than end in no match at once.
			pol.Patience = renter.DefaultPatience
		}
		pol.Progress = func(p renter.Progress) {
			note := p.String()
			r.log.Debug("round without a match", "job", id, "note", note, "quotes", quoteNotes(p.Explain))
			if after := life.After(); after != "" {
				note = fmt.Sprintf("%s (auctioned again after: %s)", note, after)
			}
			r.update(id, note, func(j *JobRecord) {
				j.State, j.Explain, j.Error = StateAuction, withLeft(p.Explain, life.Left(), life.Exclude()), note
			})
		}
		placed := time.Now()
		res, err := r.auc.Place(r.bg, req, pol)
		r.observeAuction(placed, err)
		ex := withLeft(res.Explain, life.Left(), life.Exclude())
		if err != nil {
			if r.bg.Err() != nil {
				return // stopping: not the market's fault; the next start fails the job
			}
			step := life.Unplaced(res, err)
			state, msg := StateFailed, step.Why
			if step.Outcome == renter.OutcomeNoMatch {
				state, msg = StateNoMatch, fmt.Sprintf("%s (see `gleaner job explain %s`)", step.Why, id)
			}
			r.update(id, msg, func(j *JobRecord) { j.State, j.Error, j.Explain = state, msg, ex })
			return
		}
		life.Placed(res)
		if rec.Array != "" && r.own != nil {
			r.own.Took(res.Lease) // until its provider's offer shows it
		}
		snap := life.Snapshot() // a restarted node that re-attaches goes on from it (reattach)
		lease, raw := res.Lease, res.Raw
		cid := wire.LeaseCID(raw)
		_ = r.journal.Enqueue(ledger.TypeLease, raw) // before the outcome: one ordered queue
		r.update(id, fmt.Sprintf("provider %s, %s credits per GPU-hour%s", lease.Provider, auction.FormatCredits(lease.Price), clearingNote(ex)), func(j *JobRecord) {
			if j.State == StateCancelled {
				return
			}
			j.State, j.Explain, j.Lease, j.Provider, j.Error = StateLeased, ex, raw, lease.Provider, ""
			j.LeaseCID, j.Price = cid, lease.Price
			j.ExitCode = nil // the last run's: this lease has not exited
			j.Reserved = nil
			if start := time.Unix(lease.Start, 0).UTC(); lease.Tier == auction.Gold && start.After(time.Now()) {
				j.Reserved = &start
			}
			j.Simulated = offerSimulated(r.m, lease.Provider)
			j.Attempts = life.Leases()
			j.Life = &snap
		})
		if !rec.Canary {
			r.maybeCanary(lease.Provider)
		}
		out := r.follow1(id, spec, lease, raw, specYAML, secrets, life.Checkpoint())
		if r.bg.Err() != nil {
			return // this node is stopping: the record stays leased and is followed again after a restart
		}
		if rec.Array != "" && r.own != nil {
			// Before runEnded records the end, which wakes the array: its
			// next shard's round sees these GPUs free at once, not once
			// the provider republishes (issue 36's makespan).
			r.own.Freed(lease)
		}
		if r.runEnded(id, spec, life, lease, cid, ex, out) {
			return
		}
	}
}

// runEnded does what follows the end of job id's run on lease (whose CID
// is cid, won in the round ex explains): the charge of a run that never
// began, the outcome entry, the answer's check, and the lifecycle's
// decision, recorded. It reports whether the job is over (its record says
// how); otherwise it waits to be auctioned again (waitAgain).
func (r *Jobs) runEnded(id string, spec *auction.JobSpec, life *renter.Lifecycle, lease *auction.Lease, cid string, ex *renter.Explain, out runEnd) bool {
	var voucher []byte
	if j, err := r.Get(id); err == nil {
		voucher = j.LastVoucher
	}
	if out.notStarted() {
		// The provider's settlement charges a run that never began
		// nothing (auction/provider.Charge of no running time): so
		// does this record, whatever vouchers went ahead of the start.
		r.update(id, "", func(j *JobRecord) {
			if j.BilledLease == cid {
				_ = recordCharge(j, 0, time.Now())
			}
		})
	}
	var outputs string
	if j, _ := r.Get(id); j != nil {
		outputs = j.Outputs
	}
	r.recordOutcome(cid, lease.Provider, out, voucher, outputs)
	out = r.checkAnswer(id, spec, cid, lease.Provider, out)
	if j, _ := r.Get(id); j != nil && j.State == StateCancelled {
		return true
	}
	step := life.Ended(out.typed(lease.Provider))
	if step.Done {
		state := outcomeState[step.Outcome]
		r.update(id, step.Why, func(j *JobRecord) {
			if j.State != StateCancelled {
				j.State, j.Error = state, step.Why
				if out.notStarted() && state == StateFailed {
					j.Explain = withFailedStart(ex, lease.Provider, out.why)
				}
			}
		})
		return true
	}
	r.waitAgain(id, life, len(out.checkpoint) > 0, step.Why)
	return false
}

// quoteNotes is how each provider a round asked answered, for the debug
// log: "provider: declined reason" (or the error, or the bid's price).
func quoteNotes(ex *renter.Explain) string {
	if ex == nil {
		return ""
	}
	var out []string
	for _, q := range ex.Quotes {
		switch {
		case q.Declined != "":
			out = append(out, q.Provider+": declined "+q.Declined)
		case q.Error != "":
			out = append(out, q.Provider+": "+q.Error)
		default:
			out = append(out, q.Provider+": bid "+auction.FormatCredits(q.Bid))
		}
	}
	return strings.Join(out, "; ")
}

// outcomeState is a job record's state for each typed outcome.
var outcomeState = map[renter.Outcome]string{renter.OutcomeCompleted: StateCompleted, renter.OutcomeFailed: StateFailed,
	renter.OutcomeCancelled: StateCancelled, renter.OutcomeNoMatch: StateNoMatch}

// withLeft is ex with the providers the job left listed first among the
// rejections, each with why: what `job explain` shows of the runs before
// this round. Those excluded from its auctions show as "excluded"; those
// it may go back to (they preempted it, took an award back, or displaced
// it) as "left", asked only after every other. ex itself is not changed.
func withLeft(ex *renter.Explain, left map[string]string, excluded map[string]bool) *renter.Explain {
	if ex == nil || len(left) == 0 {
		return ex
	}
	c := *ex
	c.Rejected = make([]auction.Rejection, 0, len(left)+len(ex.Rejected))
	for _, p := range slices.Sorted(maps.Keys(left)) {
		if excluded[p] {
			c.Rejected = append(c.Rejected, auction.Rejection{Provider: p, Check: "excluded", Reason: "this job left it: " + left[p]})
		} else {
			c.Rejected = append(c.Rejected, auction.Rejection{Provider: p, Check: "left",
				Reason: "this job left it: " + left[p] + "; it may go back there, after every other bidder"})
		}
	}
	c.Rejected = append(c.Rejected, ex.Rejected...)
	return &c
}

// withFailedStart is ex, the round that leased the job to provider, with
// that award marked as failed for why: the provider co-signed the lease
// but could not start the job.
func withFailedStart(ex *renter.Explain, provider, why string) *renter.Explain {
	if ex == nil {
		return nil
	}
	c := *ex
	c.Awards = slices.Clone(ex.Awards)
	for i := len(c.Awards) - 1; i >= 0; i-- {
		if a := c.Awards[i]; a.Provider == provider && a.Refused == "" && a.Error == "" {
			c.Awards[i].Error = "co-signed, but the job could not start: " + strings.TrimPrefix(why, "provider: ")
			break
		}
	}
	return &c
}

// newAuctioneer wires the auctioneer to this node's streams, offer book
// and trust, and has it measure each candidate's RTT alongside its quote
// (peers.Prober): the peerstore alone knows only the peers that DHT traffic
// or a ping happened to reach.
func (r *Jobs) newAuctioneer() error {
	r.own = renter.NewOwnView(r.m.Book(), nil)
	auc, err := renter.New(renter.Identity{Peer: r.m.Host().ID().String(), Network: r.m.Host().Network(), Key: r.key},
		auctionTransport{r}, r.own, renter.WithTrust(auctionTrust{r}),
		renter.WithProber(peers.NewProber(r.m.Host().LibP2P(), 0), 0))
	r.auc = auc
	return err
}

// auctionTransport is the auctioneer's Transport over libp2p streams:
// /auction/1 for quotes, /lease/1 for awards.
type auctionTransport struct{ r *Jobs }

func (t auctionTransport) Quote(ctx context.Context, provider, jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	var rep wire.QuoteReply
	if err := t.r.Exchange(ctx, provider, wire.QuoteProto, wire.QuoteRequest{JobID: jobID, Nonce: nonce, Spec: specYAML}, &rep); err != nil {
		return nil, "", err
	}
	return rep.Bid, rep.Decline, nil
}

func (t auctionTransport) Award(ctx context.Context, provider string, proposal []byte) ([]byte, string, error) {
	var rep wire.AwardReply
	if err := t.r.Exchange(ctx, provider, wire.AwardProto, wire.AwardRequest{Lease: proposal}, &rep); err != nil {
		return nil, "", err
	}
	return rep.Lease, rep.Refused, nil
}

// Release is renter.Releaser: a /auction/1 request with Release set,
// sent in a task of its own within releaseWait so the round's result
// never waits on it, and dropped beyond maxReleases in flight (the hold
// then lapses by itself at the provider).
func (t auctionTransport) Release(_ context.Context, provider, jobID string, nonce []byte) error {
	if releases.Add(1) > maxReleases {
		releases.Add(-1)
		return errors.New("too many releases in flight")
	}
	if !t.r.spawn(func() {
		defer releases.Add(-1)
		ctx, cancel := context.WithTimeout(t.r.bg, releaseWait)
		defer cancel()
		pid, err := peer.Decode(provider)
		if err != nil {
			return
		}
		if s, err := t.r.m.Host().LibP2P().NewStream(ctx, pid, t.r.m.Host().ProtocolID(wire.QuoteProto)); err == nil {
			_ = s.SetDeadline(time.Now().Add(releaseWait))
			_ = wire.Write(s, wire.QuoteRequest{JobID: jobID, Nonce: nonce, Release: true})
			_ = s.Close()
		}
	}) {
		releases.Add(-1)
	}
	return nil
}

// releases counts the releases in flight in this process, bounded by
// maxReleases; each lasts at most releaseWait.
var releases atomic.Int64

const (
	maxReleases = 256
	releaseWait = 2 * time.Second
)

// auctionTrust is the auctioneer's Trust: this node's reputation view,
// its fraud convictions and the peerstore's RTTs. The view is read at each
// call, since it is wired after the renter.
type auctionTrust struct{ r *Jobs }

func (t auctionTrust) Score(provider string) float64 {
	if t.r.rep == nil {
		return auction.NeutralReputation{}.Score(provider)
	}
	return t.r.rep.Score(provider)
}

func (t auctionTrust) Convicted(provider string) bool {
	return t.r.claims != nil && t.r.claims.Convicted(provider)
}

func (t auctionTrust) RTT(provider string) (time.Duration, bool) { return t.r.rtt(provider) }

// Track is the ledger's record of provider for the auctioneer's newcomer
// rule (renter.Tracker): its leases and known-answer probes.
func (t auctionTrust) Track(provider string) renter.TrackRecord {
	if t.r.claims == nil {
		return renter.TrackRecord{}
	}
	_, ev := t.r.claims.Scores()
	e := ev[provider]
	if e == nil {
		return renter.TrackRecord{}
	}
	return renter.TrackRecord{Leases: e.Leases, ProbesPassed: e.Probes[ledger.ProbePassed], ProbesFailed: e.Probes[ledger.ProbeFailed]}
}

// auctionGroup is the auctioneer's replica group for name ("" for a job
// without replicas), restored from the records on first use so that a
// restarted node still keeps replicas apart.
func (r *Jobs) auctionGroup(name string) *renter.Group {
	if name == "" {
		return nil
	}
	r.mu.Lock()
	g, ok := r.auctionGroups[name]
	if !ok {
		if r.auctionGroups == nil {
			r.auctionGroups = map[string]*renter.Group{}
		}
		g = renter.NewGroup()
		r.auctionGroups[name] = g
	}
	r.mu.Unlock()
	if !ok {
		for _, sib := range r.groupMembers(name) {
			if sib.Provider != "" {
				g.Hold(sib.ID, sib.Provider)
			}
		}
	}
	return g
}

// serviceGroup is the auction group of a service's replicas.
func serviceGroup(service string) string { return "service/" + service }

// ServiceGroup is the auction group of service's replicas, which no two
// share a provider in: its keeper holds and frees its places there.
func (r *Jobs) ServiceGroup(service string) *renter.Group {
	return r.auctionGroup(serviceGroup(service))
}

// groupMembers are the records an auction group restores its holds from:
// a verify group's replicas, or a service's replicas that have not ended
// (an ended one holds no provider).
func (r *Jobs) groupMembers(name string) []JobRecord {
	svc, ok := strings.CutPrefix(name, "service/")
	if !ok {
		return r.Siblings(name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []JobRecord
	for _, j := range r.jobs {
		if j.Service == svc && j.Group == "" && !Terminal(j.State) {
			out = append(out, *j)
		}
	}
	return out
}

// Exchange sends one request on a fresh stream and reads one reply.
func (r *Jobs) Exchange(ctx context.Context, provider, proto string, req, rep any) error {
	pid, err := peer.Decode(provider)
	if err != nil {
		return err
	}
	s, err := r.m.Host().LibP2P().NewStream(ctx, pid, r.m.Host().ProtocolID(proto))
	if err != nil {
		return err
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := wire.Write(s, req); err != nil {
		return err
	}
	return wire.Read(s, wire.MaxEventFrame, rep)
}

func offerSimulated(m *offers.Market, provider string) bool {
	if o, _, ok := m.Book().Get(provider); ok {
		for _, g := range o.GPUs {
			if g.Simulated {
				return true
			}
		}
	}
	return false
}

// PeerRTT is the peerstore's latency average for provider: what pings
// (peers.Prober.Measure records each measurement there) and DHT requests
// have measured, the RTT of a provider before it is asked for a quote.
func PeerRTT(m *offers.Market, provider string) (time.Duration, bool) {
	pid, err := peer.Decode(provider)
	if err != nil {
		return 0, false
	}
	d := m.Host().LibP2P().Peerstore().LatencyEWMA(pid)
	return d, d > 0
}

// recordOutcome journals how the run ended, as the renter saw it: the
// evidence reputation is later computed from.
func (r *Jobs) recordOutcome(leaseCID, provider string, out runEnd, voucher []byte, outputs string) {
	if v, err := ledger.ReadVoucher(voucher); err != nil || v.Lease != leaseCID {
		voucher = nil // a run that ended before its first voucher cites none, not the last run's
	}
	payload, err := json.Marshal(ledger.Outcome{Lease: leaseCID, Provider: provider, Result: out.result, Detail: out.why, Voucher: voucher, Outputs: outputs})
	if err == nil {
		_ = r.journal.Enqueue(ledger.TypeOutcome, payload)
	}
}

// TimeAuctions has each auction from now on timed into c, the node's
// metrics (node/node_metrics.go starts them).
func (r *Jobs) TimeAuctions(c *metrics.Calls) { r.auctionTimer.Store(c) }

// observeAuction records one auction (run's Place) begun at
// start and ended with err, when this node's metrics are on. An auction
// cut short by the node stopping is no outcome of the market's, and is
// left out.
func (r *Jobs) observeAuction(start time.Time, err error) {
	timer := r.auctionTimer.Load()
	if timer == nil || (err != nil && r.bg.Err() != nil) {
		return
	}
	outcome := metrics.AuctionAwarded
	switch {
	case errors.Is(err, renter.ErrNoMatch):
		outcome = metrics.AuctionNoMatch
	case err != nil:
		outcome = metrics.AuctionFailed
	}
	timer.Auction(time.Since(start), outcome)
}

// clearingNote is the lease note's why: " (1.5/GPU-h: the runner-up's
// price, ...)", or "" for a round that did not say.
func clearingNote(ex *renter.Explain) string {
	if ex == nil || ex.Clearing == nil {
		return ""
	}
	_, how, _ := strings.Cut(ex.Clearing.Why, ": ") // the note names the price already
	return " (" + how + ")"
}
