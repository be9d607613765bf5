package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
)

// providerJobs is the provider's side of a rental over libp2p, bbolt and
// Docker. The market logic (which GPUs a bid names, claims, preemption,
// start-once, expiry, billing) is the scheduler's (auction/provider);
// this adapter quotes and accepts over streams, persists lease states,
// runs containers and carries out the actions the scheduler returns.
type providerJobs struct {
	p     *provider
	key   crypto.PrivKey
	exec  executor.Executor // nil: this node cannot run jobs, so it never bids
	sched *sched.Scheduler
	// wrongAnswers: fault injection (Options.WrongAnswers).
	wrongAnswers bool
	engine       auction.BidEngine
	log          *slog.Logger
	bg           context.Context
	tag          string        // prefixes this node's executor job IDs; see execTag
	gpus         attest.Source // read for telemetry; nil when the node has no GPUs
	journal      *feeds        // this node's ledger feed
	kick         chan struct{} // wakes the tick loop (a voucher arrived, a lease ended)

	mu     sync.Mutex // guards leases and each activeLease's job
	leases map[string]*activeLease
}

// activeLease is what the adapter holds for a lease the scheduler has:
// the wire bytes, the container, the streams following it, and the
// channels through which the scheduler's actions reach its run.
type activeLease struct {
	lease *auction.Lease
	raw   []byte
	hub   *eventHub // the streams following the job
	job   executor.Job

	launch     chan struct{} // closed by the scheduler's Launch action
	launchOnce sync.Once
	// ctrl carries the scheduler's actions for a started lease to its run:
	// pause, resume and the endings. Buffered: do never blocks on a run.
	ctrl chan sched.Action
	done chan struct{} // closed when the lease is released
}

// refusedRaced is the award refusal of a provider whose bid's GPUs went
// to another award first: the renter asks for quotes again at once.
const refusedRaced = "the GPUs of our bid were leased meanwhile; auction again"

// maxBillingSec bounds the interval a provider works before the next
// voucher is due (and what one unpaid interval can cost it).
const maxBillingSec = 3600

// defaultSurge: see BidEngine.Surge.
const defaultSurge = 0.5

func newProviderJobs(bg context.Context, p *provider, key crypto.PrivKey, exec executor.Executor, startDeadline time.Duration, log *slog.Logger) *providerJobs {
	var opts []sched.Option
	if startDeadline > 0 {
		opts = append(opts, sched.WithStartDeadline(startDeadline))
	}
	return &providerJobs{p: p, key: key, exec: exec, log: log, bg: bg, tag: execTag(p.Market().Host().ID().String()),
		sched: sched.New(opts...), leases: map[string]*activeLease{}, kick: make(chan struct{}, 1)}
}

func (pj *providerJobs) handleQuote(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	var req quoteRequest
	if err := readMsg(s, maxRequestFrame, &req); err != nil {
		_ = s.Reset()
		return
	}
	_ = writeMsg(s, pj.quote(req))
}

func (pj *providerJobs) quote(req quoteRequest) quoteReply {
	if pj.exec == nil {
		return quoteReply{Decline: "this provider has no container runtime"}
	}
	spec, err := auction.ParseJobSpec(req.Spec)
	if err != nil {
		return quoteReply{Decline: "bad job spec: " + err.Error()}
	}
	offer := pj.p.Current()
	if offer == nil {
		return quoteReply{Decline: "not offering right now"}
	}
	now := time.Now()
	// Surge pricing inside the owner's own availability calendar: half
	// again the floor when fully busy (auction.BidEngine documents the
	// rule), never above the renter's max_price.
	engine := pj.engine
	engine.Surge, engine.Peak = defaultSurge, offer.Calendar
	bid, decl := engine.Quote(spec, offer, pj.sched.Utilisation(spec.Tier, now), now)
	if decl != nil {
		return quoteReply{Decline: decl.Reason}
	}
	bid.JobID, bid.Nonce = req.JobID, req.Nonce
	start := time.Unix(bid.Start, 0)
	plan, err := pj.sched.Plan(bid.GPUs, spec.Tier, sched.Span{Start: start, End: start.Add(time.Duration(bid.DurationSec) * time.Second)}, now)
	if err != nil {
		return quoteReply{Decline: auction.ReasonBusy}
	}
	if bid.GPUHashes, err = pj.sched.Hashes(plan); err != nil {
		return quoteReply{Decline: "GPU inventory changed; ask again"}
	}
	sb, err := auction.SignBid(&bid, pj.key)
	if err != nil {
		return quoteReply{Decline: "cannot sign bid: " + err.Error()}
	}
	raw, err := sb.Marshal()
	if err != nil {
		return quoteReply{Decline: err.Error()}
	}
	return quoteReply{Bid: raw}
}

func (pj *providerJobs) handleAward(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	var req awardRequest
	if err := readMsg(s, maxRequestFrame, &req); err != nil {
		_ = s.Reset()
		return
	}
	raw, err := pj.accept(req.Lease, s.Conn().RemotePeer().String())
	if err != nil {
		_ = writeMsg(s, awardReply{Refused: err.Error()})
		return
	}
	_ = writeMsg(s, awardReply{Lease: raw})
}

// accept checks an award against the provider's own bid, has the
// scheduler claim its GPUs and counter-signs. The lease is durable and
// journaled before the renter hears of it.
func (pj *providerJobs) accept(proposal []byte, from string) ([]byte, error) {
	l, sl, err := auction.DecodeSignedLease(proposal, false)
	if err != nil {
		return nil, err
	}
	me := pj.p.Market().Host().ID().String()
	if l.Provider != me || l.Renter != from || l.Network != pj.p.Market().Host().Network() {
		return nil, errors.New("the lease names other parties or another network")
	}
	bid, _, err := auction.DecodeSignedBid(l.Bid, time.Now())
	if err != nil {
		return nil, fmt.Errorf("the lease's bid: %w", err)
	}
	if l.BillingSec > maxBillingSec {
		return nil, fmt.Errorf("billing interval %d s: at most %d", l.BillingSec, maxBillingSec)
	}
	if bid.Provider != me {
		return nil, errors.New("the lease's bid is not ours")
	}
	if err := sched.HonoursBid(l, bid, time.Now()); err != nil {
		return nil, err
	}
	want, err := pj.sched.Indexes(bid.GPUHashes)
	if err != nil {
		return nil, errors.New("the GPUs of our bid are no longer in this machine")
	}
	// The same award again (a renter whose reply was lost) gets the same
	// lease; any other award for this job is refused by the claim.
	pj.mu.Lock()
	if al, dup := pj.leases[l.JobID]; dup {
		pj.mu.Unlock()
		if _, held, err := auction.ReadLease(al.raw); err == nil && bytes.Equal(held.Body, sl.Body) {
			return al.raw, nil
		}
		return nil, errors.New("a lease for this job exists already")
	}
	pj.mu.Unlock()
	if err := sl.CounterSign(pj.key); err != nil {
		return nil, err
	}
	raw, err := sl.Marshal()
	if err != nil {
		return nil, err
	}
	victims, err := pj.sched.Claim(l, want, time.Now())
	if errors.Is(err, sched.ErrRaced) {
		return nil, errors.New(refusedRaced)
	}
	if err != nil {
		return nil, err
	}
	al := &activeLease{lease: l, raw: raw, hub: &eventHub{}, launch: make(chan struct{}),
		ctrl: make(chan sched.Action, 8), done: make(chan struct{})}
	pj.mu.Lock()
	pj.leases[l.JobID] = al
	pj.mu.Unlock()
	if err := pj.saveLease(l.JobID, raw, leaseAwarded); err != nil {
		pj.forget(l.JobID)
		return nil, err
	}
	// Journaled before the renter hears of it, and in order with this
	// node's settlements (see settle).
	pj.journal.record(ledger.TypeLease, raw)
	pj.do(victims)
	return raw, nil
}

// lookup is the adapter's record of a lease, nil if none.
func (pj *providerJobs) lookup(jobID string) *activeLease {
	pj.mu.Lock()
	defer pj.mu.Unlock()
	return pj.leases[jobID]
}

// forget drops a lease whose claim could not be recorded.
func (pj *providerJobs) forget(jobID string) {
	pj.do(pj.sched.Release(jobID, time.Now()))
	pj.mu.Lock()
	delete(pj.leases, jobID)
	pj.mu.Unlock()
}

// release frees a settled lease's GPUs: the scheduler's part, then the
// adapter's, and launches whatever waited for those GPUs.
func (pj *providerJobs) release(jobID string) {
	acts := pj.sched.Release(jobID, time.Now())
	pj.mu.Lock()
	if al, ok := pj.leases[jobID]; ok {
		delete(pj.leases, jobID)
		close(al.done)
	}
	pj.mu.Unlock()
	pj.do(acts)
	pj.poke()
}

// gpusOf is the GPU indexes the scheduler holds for a lease: a copy.
func (pj *providerJobs) gpusOf(jobID string) []int {
	if info, ok := pj.sched.Lease(jobID, time.Now()); ok {
		return info.GPUs
	}
	return nil
}

func randomNonce() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}

// dealsWith: author rents from this provider now.
func (pj *providerJobs) dealsWith(author string) bool { return pj.sched.DealsWith(author) }
