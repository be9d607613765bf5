package gateway

import (
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Figures are one replica's or the whole service's, as shown and billed.
// For a replica, Requests and Errors count attempts (a retried request is
// an error on the first replica and a request on the next); for the
// service they count what clients got. Latency is from the request's
// arrival at the gateway to its answer's last byte, first byte to its
// first; the percentiles are over the last 1,024 requests. Money is in
// auction.Credits (millionths), computed in integers and rounded down.
type Figures struct {
	Requests         uint64          `json:"requests"`
	Errors           uint64          `json:"errors"`
	Retries          uint64          `json:"retries,omitempty"` // the service's only
	Outstanding      int64           `json:"outstanding"`
	QPS              float64         `json:"qps"`
	LatencyP50       time.Duration   `json:"latency_p50_ns"`
	LatencyP95       time.Duration   `json:"latency_p95_ns"`
	LatencyP99       time.Duration   `json:"latency_p99_ns"`
	FirstByteP50     time.Duration   `json:"first_byte_p50_ns"`
	FirstByteP95     time.Duration   `json:"first_byte_p95_ns"`
	FirstByteP99     time.Duration   `json:"first_byte_p99_ns"`
	PromptTokens     uint64          `json:"prompt_tokens"`
	CompletionTokens uint64          `json:"completion_tokens"`
	Tokens           uint64          `json:"tokens"`
	Spent            auction.Credits `json:"spent"`
	PerKRequests     auction.Credits `json:"cost_per_1k_requests"`
	PerMTokens       auction.Credits `json:"cost_per_1m_tokens"`
}

// ReplicaStats are one replica's state and figures.
type ReplicaStats struct {
	ID    string        `json:"id"`
	Ready bool          `json:"ready"`
	RTT   time.Duration `json:"rtt_ns"`
	Score int64         `json:"score"` // the routing score now; lower is preferred
	Figures
}

// Stats is a snapshot of the gateway, for the node's RPC.
type Stats struct {
	Service  string         `json:"service"`
	Addr     string         `json:"addr,omitempty"`
	Window   time.Duration  `json:"window_ns"` // QPS is over this
	Figures                 // the service's
	Replicas []ReplicaStats `json:"replicas"`
}

// Stats returns the gateway's figures now.
func (g *Gateway) Stats() Stats {
	now := g.cfg.Now()
	st := Stats{Service: g.cfg.Service, Window: g.cfg.Window}
	if a := g.Addr(); a != nil {
		st.Addr = a.String()
	}
	var outstanding int64
	for _, rep := range g.snapshot() {
		f := rep.figs.snapshot(now, costOf(*rep.cost.Load()))
		f.Outstanding = rep.outstanding.Load()
		outstanding += f.Outstanding
		st.Replicas = append(st.Replicas, ReplicaStats{
			ID: rep.id, Ready: rep.ready.Load(), RTT: time.Duration(rep.rtt.Load()),
			Score: g.score(rep), Figures: f,
		})
	}
	st.Figures = g.figs.snapshot(now, costOf(g.cfg.Cost))
	st.Outstanding = outstanding
	return st
}

func costOf(f func() auction.Credits) auction.Credits {
	if f == nil {
		return 0
	}
	return f()
}

// ringSize is how many latency samples a figures keeps.
const ringSize = 1024

// figures accumulates one replica's or the service's numbers in bounded
// memory: counters, two rings of samples and a ring of QPS buckets.
type figures struct {
	mu               sync.Mutex
	requests, errors uint64
	retries          uint64
	prompt, complTok uint64
	tokens           uint64
	lat, first       [ringSize]time.Duration
	n                uint64 // samples ever recorded; the ring holds min(n, ringSize)
	bucket           time.Duration
	counts           [qpsBuckets]uint32
	stamps           [qpsBuckets]int64 // which bucket number counts[i] holds
	created          time.Time
}

const qpsBuckets = 40

func newFigures(window time.Duration, now time.Time) *figures {
	return &figures{bucket: max(window/qpsBuckets, time.Millisecond), created: now}
}

func (f *figures) retry() {
	f.mu.Lock()
	f.retries++
	f.mu.Unlock()
}

func (f *figures) record(now time.Time, lat, first time.Duration, failed bool, o outcome) {
	b := now.UnixNano() / int64(f.bucket)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if failed {
		f.errors++
	}
	if o.hasUsage && o.status < 400 {
		f.prompt += o.usage.PromptTokens
		f.complTok += o.usage.CompletionTokens
		f.tokens += o.usage.TotalTokens
	}
	i := f.n % ringSize
	f.lat[i], f.first[i] = lat, first
	f.n++
	j := b % qpsBuckets
	if f.stamps[j] != b {
		f.stamps[j], f.counts[j] = b, 0
	}
	f.counts[j]++
}

func (f *figures) snapshot(now time.Time, spent auction.Credits) Figures {
	f.mu.Lock()
	out := Figures{
		Requests: f.requests, Errors: f.errors, Retries: f.retries,
		PromptTokens: f.prompt, CompletionTokens: f.complTok, Tokens: f.tokens,
	}
	n := int(min(f.n, ringSize))
	lat := slices.Clone(f.lat[:n])
	first := slices.Clone(f.first[:n])
	cur := now.UnixNano() / int64(f.bucket)
	var count uint64
	for i := range qpsBuckets {
		if s := f.stamps[i]; s > cur-qpsBuckets && s <= cur {
			count += uint64(f.counts[i])
		}
	}
	created := f.created
	f.mu.Unlock()

	// The window is the last qpsBuckets-1 whole buckets and the current
	// one so far, or less when the figures are younger than that.
	span := time.Duration(qpsBuckets-1)*f.bucket + time.Duration(now.UnixNano()-cur*int64(f.bucket))
	span = min(span, now.Sub(created))
	if span > 0 {
		out.QPS = float64(count) / span.Seconds()
	}
	out.LatencyP50, out.LatencyP95, out.LatencyP99 = percentiles(lat)
	out.FirstByteP50, out.FirstByteP95, out.FirstByteP99 = percentiles(first)
	if spent > 0 {
		out.Spent = spent
		out.PerKRequests = perUnits(spent, 1_000, out.Requests)
		out.PerMTokens = perUnits(spent, 1_000_000, out.Tokens)
	}
	return out
}

// percentiles returns the 50th, 95th and 99th of xs (nearest rank).
func percentiles(xs []time.Duration) (p50, p95, p99 time.Duration) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	at := func(p int) time.Duration { return xs[(len(xs)*p+99)/100-1] }
	return at(50), at(95), at(99)
}

// perUnits is spent × per / count rounded down, in 128 bits so that no
// product overflows; 0 when count is 0.
func perUnits(spent auction.Credits, per, count uint64) auction.Credits {
	if count == 0 || spent <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(spent), per)
	if hi >= count { // the quotient would not fit: saturate
		return auction.Credits(1<<63 - 1)
	}
	q, _ := bits.Div64(hi, lo, count)
	if q > 1<<63-1 {
		return auction.Credits(1<<63 - 1)
	}
	return auction.Credits(q)
}
