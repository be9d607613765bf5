package sim

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// Network is the in-memory network's configuration.
type Network struct {
	// Latency is the one-way delay between two nodes on one continent;
	// across continents it is Latency*CrossFactor. Jitter adds up to that
	// much more, drawn per message.
	Latency     time.Duration
	CrossFactor int64
	Jitter      time.Duration
	// Loss is the share of messages lost (a quote the renter never hears
	// back, an award that times out).
	Loss float64
	// GossipDegree is how many copies of a gossiped message each
	// subscriber receives (gossipsub's mesh degree D; duplicates included).
	GossipDegree int64
	// GossipDelay is how long an offer takes to reach the renters' books.
	GossipDelay time.Duration
}

// DefaultNetwork: 25 ms within a continent, 4x across, 10 ms of jitter,
// 0.5% loss, gossipsub's D = 6, a second for an offer to spread.
func DefaultNetwork() Network {
	return Network{Latency: 25 * time.Millisecond, CrossFactor: 4, Jitter: 10 * time.Millisecond, Loss: 0.005,
		GossipDegree: 6, GossipDelay: time.Second}
}

// errLost is what the renter sees of a message the network dropped: the
// exchange's deadline passes without an answer.
var errLost = errors.New("no answer before the deadline (message lost)")

// transport is renter.Transport over the simulated network for one
// renter: it delivers a quote request to the provider's desk at once and
// accounts its latency to the round, which the award then waits out on
// the virtual clock, so that other renters may take the GPUs meanwhile
// (a lost race) as on a real network.
type transport struct {
	m      *market
	renter *simRenter
	// round is, per job, how long the current round's quotes took: the
	// slowest answer, or the quote deadline when one was lost. Quotes
	// run in goroutines of their own, hence the lock.
	mu    sync.Mutex
	round map[string]time.Duration
	nonce map[string]string // the round's nonce, per job: a new round starts from 0
}

var (
	_ renter.Transport = (*transport)(nil)
	_ renter.Releaser  = (*transport)(nil)
)

func (t *transport) Quote(_ context.Context, provider, jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	p := t.m.byPeer[provider]
	if p == nil {
		return nil, "", errors.New("no such peer")
	}
	t.m.traffic.add(int64(len(specYAML) + len(jobID) + len(nonce) + frameOverhead))
	rtt := t.m.rtt(t.renter.continent, p.sp.Continent, jobID, provider, nonce)
	lost := t.m.lost(jobID, provider, nonce)
	t.mu.Lock()
	wait := rtt
	if lost {
		wait = t.m.cfg.QuoteDeadline
	}
	if t.nonce[jobID] != string(nonce) {
		t.nonce[jobID], t.round[jobID] = string(nonce), 0
	}
	t.round[jobID] = max(t.round[jobID], wait)
	t.mu.Unlock()
	if lost {
		return nil, "", errLost
	}
	raw, decline := p.quote(specYAML, jobID, t.renter.id, nonce)
	if decline == auction.ReasonBusy {
		t.m.quotesBusy.Add(1)
	}
	t.m.traffic.add(int64(len(raw) + len(decline) + frameOverhead))
	return raw, decline, nil
}

func (t *transport) Award(ctx context.Context, provider string, proposal []byte) ([]byte, string, error) {
	p := t.m.byPeer[provider]
	if p == nil {
		return nil, "", errors.New("no such peer")
	}
	job := jobIDOf(proposal)
	t.mu.Lock()
	quotes := t.round[job]
	delete(t.round, job)
	delete(t.nonce, job)
	t.mu.Unlock()
	t.m.traffic.add(int64(len(proposal) + frameOverhead))
	rtt := t.m.rtt(t.renter.continent, p.sp.Continent, job, provider, proposal[len(proposal)-8:])
	if t.m.lost(job, provider, proposal[len(proposal)-8:]) {
		_ = t.m.w.Sleep(ctx, quotes+t.m.cfg.AwardDeadline)
		return nil, "", errLost
	}
	// The quotes' time and half the award's round trip pass before the
	// provider sees the award; the other half before the renter hears.
	if err := t.m.w.Sleep(ctx, quotes+rtt/2); err != nil {
		return nil, "", err
	}
	cosigned, refusal := p.award(proposal, t.renter.id)
	t.m.traffic.add(int64(len(cosigned) + len(refusal) + frameOverhead))
	if err := t.m.w.Sleep(ctx, rtt-rtt/2); err != nil {
		return nil, "", err
	}
	return cosigned, refusal, nil
}

// Release is renter.Releaser over the simulated network: the provider
// drops the quote's hold when the message arrives, half a round trip
// from now, unless the network loses it (the hold then lapses). It is an
// event on the world's loop, so it never blocks the renter and the run
// stays deterministic.
func (t *transport) Release(_ context.Context, provider, jobID string, nonce []byte) error {
	p := t.m.byPeer[provider]
	if p == nil {
		return errors.New("no such peer")
	}
	t.m.traffic.add(int64(len(jobID) + len(nonce) + frameOverhead))
	if t.m.lost(jobID, provider, append([]byte("release"), nonce...)) {
		return nil
	}
	rtt := t.m.rtt(t.renter.continent, p.sp.Continent, jobID, provider, nonce)
	who, n := t.renter.id, string(nonce)
	t.m.w.after(rtt/2, func() { p.desk.Release(jobID, who, []byte(n), p.m.w.Now()) })
	return nil
}

// frameOverhead is a stream message's framing: the length prefix and the
// message's envelope fields around its payload.
const frameOverhead = 16

// jobIDOf is the job a proposal is for, to pair an award with the round
// its quotes were in (the renter's own bytes: no need to verify them).
func jobIDOf(proposal []byte) string {
	l, _, err := auction.DecodeLeaseUnverified(proposal)
	if err != nil {
		return ""
	}
	return l.JobID
}

// hash64 is a deterministic hash of the parts, for per-message draws that
// must not depend on the order goroutines run in.
func hash64(seed uint64, parts ...string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range 8 {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

// traffic counts what went over the wire; quotes run concurrently.
type traffic struct {
	mu       sync.Mutex
	messages int64
	bytes    int64
	gossip   map[string]int64 // bytes published per continent shard
	heads    int64            // bytes of feed heads published (one topic, every node)
}

func (t *traffic) add(n int64) {
	t.mu.Lock()
	t.messages++
	t.bytes += n
	t.mu.Unlock()
}

func (t *traffic) publish(continent string, n int64) {
	t.mu.Lock()
	t.gossip[continent] += n
	t.mu.Unlock()
}
