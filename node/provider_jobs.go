package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
)

// providerJobs is the provider's side of a rental: it quotes, accepts
// awards for GPUs it has free, and runs leased jobs in the executor.
type providerJobs struct {
	p    *provider
	key  crypto.PrivKey
	exec executor.Executor // nil: this node cannot run jobs, so it never bids
	// wrongAnswers: fault injection (Options.WrongAnswers).
	wrongAnswers bool
	engine       auction.BidEngine
	log          *slog.Logger
	bg           context.Context
	tag          string        // prefixes this node's executor job IDs; see execTag
	gpus         attest.Source // read for telemetry; nil when the node has no GPUs
	journal      *feeds        // this node's ledger feed

	mu     sync.Mutex // guards leases, used and quotedAt
	leases map[string]*activeLease
	used   map[int]bool // GPU indexes held by leases
	// quotedAt is when each GPU was last named in a bid (see planGPUs);
	// at most one entry per GPU.
	quotedAt map[int]time.Time

	// startDeadline: see DefaultStartDeadline.
	startDeadline time.Duration
}

type activeLease struct {
	lease   *auction.Lease
	raw     []byte
	gpus    []int
	job     executor.Job
	preempt chan string   // a reason, at most once
	done    chan struct{} // closed when the lease releases its GPUs
	hub     *eventHub     // the streams following the job
	// after are the leases this one took GPUs from (bronze preempted for a
	// higher tier); its job starts once they have released them.
	after []chan struct{}
	// started is set, under pj.mu, by the one start the lease allows (or
	// by its expiry, which forbids any).
	started bool
}

// refusedRaced is the award refusal of a provider whose bid's GPUs went
// to another award first: the renter asks for quotes again at once.
const refusedRaced = "the GPUs of our bid were leased meanwhile; auction again"

// maxBillingSec bounds the interval a provider works before the next
// voucher is due (and what one unpaid interval can cost it).
const maxBillingSec = 3600

// defaultSurge: see BidEngine.Surge.
const defaultSurge = 0.5

func newProviderJobs(bg context.Context, p *provider, key crypto.PrivKey, exec executor.Executor, log *slog.Logger) *providerJobs {
	return &providerJobs{p: p, key: key, exec: exec, log: log, bg: bg, tag: execTag(p.m.host.ID().String()),
		leases: map[string]*activeLease{}, used: map[int]bool{}, startDeadline: DefaultStartDeadline}
}

// utilisation is the fraction of offered GPUs held by leases, as a job of
// tier t sees it: for silver and gold, GPUs held by bronze leases count as
// free, since bronze yields to them.
func (pj *providerJobs) utilisation(t auction.Tier, total int) float64 {
	pj.mu.Lock()
	defer pj.mu.Unlock()
	if total == 0 {
		return 1
	}
	held := len(pj.used)
	if t != auction.Bronze {
		for _, al := range pj.leases {
			if al.lease.Tier == auction.Bronze {
				held -= len(al.gpus)
			}
		}
	}
	return float64(max(held, 0)) / float64(total)
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
	pj.p.mu.Lock()
	offer := pj.p.current
	pj.p.mu.Unlock()
	if offer == nil {
		return quoteReply{Decline: "not offering right now"}
	}
	// Surge pricing inside the owner's own availability calendar: half
	// again the floor when fully busy (auction.BidEngine documents the
	// rule), never above the renter's max_price.
	engine := pj.engine
	engine.Surge, engine.Peak = defaultSurge, offer.Calendar
	bid, decl := engine.Quote(spec, offer, pj.utilisation(spec.Tier, len(offer.GPUs)), time.Now())
	if decl != nil {
		return quoteReply{Decline: decl.Reason}
	}
	bid.JobID, bid.Nonce = req.JobID, req.Nonce
	pj.mu.Lock()
	plan := pj.planGPUs(bid.GPUs, spec.Tier)
	pj.mu.Unlock()
	if plan == nil {
		return quoteReply{Decline: auction.ReasonBusy}
	}
	if bid.GPUHashes = pj.hashesOf(plan); bid.GPUHashes == nil {
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

// accept checks an award against the provider's own bid and free GPUs,
// reserves the GPUs and counter-signs. The lease is durable before the
// renter hears of it.
func (pj *providerJobs) accept(proposal []byte, from string) ([]byte, error) {
	l, sl, err := auction.DecodeSignedLease(proposal, false)
	if err != nil {
		return nil, err
	}
	me := pj.p.m.host.ID().String()
	if l.Provider != me || l.Renter != from || l.Network != pj.p.m.host.Network() {
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
	if err := honoursBid(l, bid, time.Now()); err != nil {
		return nil, err
	}
	want := pj.indexesOf(bid.GPUHashes)
	if want == nil {
		return nil, errors.New("the GPUs of our bid are no longer in this machine")
	}
	pj.mu.Lock()
	defer pj.mu.Unlock()
	if al, dup := pj.leases[l.JobID]; dup {
		// The same award again (a renter whose reply was lost) gets the
		// same lease; any other award for this job is refused.
		if _, held, err := auction.ReadLease(al.raw); err == nil && bytes.Equal(held.Body, sl.Body) {
			return al.raw, nil
		}
		return nil, errors.New("a lease for this job exists already")
	}
	gpus, after := pj.claimGPUs(want, l.Tier)
	if gpus == nil {
		return nil, errors.New(refusedRaced)
	}
	if err := sl.CounterSign(pj.key); err != nil {
		return nil, err
	}
	raw, err := sl.Marshal()
	if err != nil {
		return nil, err
	}
	if err := pj.saveLease(l.JobID, raw, leaseAwarded); err != nil {
		return nil, err
	}
	for _, g := range gpus {
		pj.used[g] = true
	}
	// Journaled before the renter hears of it, and in order with this
	// node's settlements (see settle).
	pj.journal.record(ledger.TypeLease, raw)
	pj.leases[l.JobID] = &activeLease{lease: l, raw: raw, gpus: gpus, preempt: make(chan string, 1), done: make(chan struct{}), after: after, hub: &eventHub{}}
	time.AfterFunc(pj.startDeadline, func() {
		if pj.bg.Err() == nil {
			pj.expireUnstarted(l.JobID)
		}
	})
	return raw, nil
}

// freeGPUs picks n available GPU indexes not held by a lease (n = 0: all
// of them); nil if too few. Called with pj.mu held.
func (pj *providerJobs) freeGPUs(n int) []int {
	pj.p.mu.Lock()
	avail := append([]int(nil), pj.p.avail.Available...)
	pj.p.mu.Unlock()
	out := []int{}
	for _, i := range avail {
		if !pj.used[i] && (n == 0 || len(out) < n) {
			out = append(out, i)
		}
	}
	if len(out) < n {
		return nil
	}
	return out
}

func (pj *providerJobs) release(jobID string) {
	pj.mu.Lock()
	defer pj.mu.Unlock()
	if al, ok := pj.leases[jobID]; ok {
		for _, g := range al.gpus {
			delete(pj.used, g)
		}
		delete(pj.leases, jobID)
		close(al.done)
	}
}

// planGPUs picks the GPUs a bid will name: free ones, or for silver and
// gold, GPUs held by bronze leases (preemptible); nil if there are not n.
// Nothing is reserved: accept claims them. Called with pj.mu held.
func (pj *providerJobs) planGPUs(n int, tier auction.Tier) []int {
	if free := pj.freeGPUs(0); len(free) >= n {
		// Concurrent quotes name different free GPUs where they can: the
		// least recently quoted first. Naming the same first free GPUs in
		// every quote made a burst of awards collide on them while other
		// GPUs sat idle (nothing is reserved before the award).
		slices.SortStableFunc(free, func(a, b int) int { return pj.quotedAt[a].Compare(pj.quotedAt[b]) })
		plan := free[:n]
		if pj.quotedAt == nil {
			pj.quotedAt = map[int]time.Time{}
		}
		now := time.Now()
		for _, g := range plan {
			pj.quotedAt[g] = now
		}
		slices.Sort(plan)
		return plan
	}
	if tier == auction.Bronze {
		return nil
	}
	plan := pj.freeGPUs(0)
	for _, al := range pj.leases {
		if al.lease.Tier == auction.Bronze {
			plan = append(plan, al.gpus...)
		}
	}
	if len(plan) < n {
		return nil
	}
	slices.Sort(plan)
	return plan[:n]
}

// claimGPUs takes exactly the GPUs want for a new lease of tier: each must
// be free or, for silver and gold, held by a bronze lease, which is then
// preempted with its notice (the new lease starts once those are
// released). nil if any is held otherwise. Called with pj.mu held.
func (pj *providerJobs) claimGPUs(want []int, tier auction.Tier) ([]int, []chan struct{}) {
	holder := map[int]*activeLease{}
	for _, al := range pj.leases {
		for _, g := range al.gpus {
			holder[g] = al
		}
	}
	avail := map[int]bool{}
	for _, g := range pj.freeGPUs(0) {
		avail[g] = true
	}
	victims := map[*activeLease]bool{}
	for _, g := range want {
		switch al := holder[g]; {
		case al == nil && avail[g]:
		case al != nil && al.lease.Tier == auction.Bronze && tier != auction.Bronze:
			victims[al] = true
		default:
			return nil, nil
		}
	}
	var after []chan struct{}
	for v := range victims {
		select {
		case v.preempt <- "a higher tier needs the GPU":
		default:
		}
		// The claimed GPUs now belong to the new lease: the victim's
		// release frees only the rest.
		v.gpus = slices.DeleteFunc(v.gpus, func(g int) bool { return slices.Contains(want, g) })
		after = append(after, v.done)
	}
	return want, after
}

// hashesOf names GPUs by index as bids, leases and telemetry do; nil if
// the inventory no longer has one of them.
func (pj *providerJobs) hashesOf(idx []int) []string {
	pj.p.mu.Lock()
	defer pj.p.mu.Unlock()
	inv := pj.p.avail.Inventory.GPUs
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		if i < 0 || i >= len(inv) {
			return nil
		}
		out = append(out, attest.UUIDHash(inv[i].UUID))
	}
	return out
}

// indexesOf is hashesOf's inverse; nil if a hash names no GPU here.
func (pj *providerJobs) indexesOf(hashes []string) []int {
	pj.p.mu.Lock()
	defer pj.p.mu.Unlock()
	out := make([]int, 0, len(hashes))
	for _, h := range hashes {
		i := slices.IndexFunc(pj.p.avail.Inventory.GPUs, func(g attest.GPU) bool { return attest.UUIDHash(g.UUID) == h })
		if i < 0 {
			return nil
		}
		out = append(out, i)
	}
	return out
}

func randomNonce() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}

// reclaim preempts bronze jobs whose GPUs the owner took back (a GPU
// withdrawn for being busy with the owner's work or over a limit). Silver
// and gold jobs are never preempted inside their window.
func (pj *providerJobs) reclaim(a attest.Availability) {
	pj.mu.Lock()
	defer pj.mu.Unlock()
	for _, al := range pj.leases {
		if al.lease.Tier != auction.Bronze {
			continue
		}
		for _, g := range al.gpus {
			why, out := a.Withdrawn[g]
			if !out {
				continue
			}
			select {
			case al.preempt <- "the owner reclaimed the GPU: " + why:
			default: // already being preempted
			}
		}
	}
}

// dealsWith: author rents from this provider now.
func (pj *providerJobs) dealsWith(author string) bool {
	pj.mu.Lock()
	defer pj.mu.Unlock()
	for _, al := range pj.leases {
		if al.lease.Renter == author {
			return true
		}
	}
	return false
}
