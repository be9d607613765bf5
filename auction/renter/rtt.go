package renter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Round trips measured in the quote exchange. Trust.RTT is what the node
// learnt earlier (in node, the peerstore's average, which only DHT traffic
// and pings fill), so a fresh renter knows none, and a spec that sets
// max_rtt_ms would admit no bid at all. With a Prober, each candidate's
// round trip is measured alongside its quote and the round ranks by that.

// Prober measures round trips to providers. It may be called from several
// goroutines at once.
type Prober interface {
	// MeasureRTT times one round trip to provider: from writing a nonce
	// the provider cannot predict to reading it echoed back, so that a
	// provider can delay its echo to look farther, never answer early to
	// look closer. It fails when no matching echo came back before ctx
	// ended.
	MeasureRTT(ctx context.Context, provider string) (time.Duration, error)
}

// DefaultRTTDeadline is how long a probe waits for its echo (WithProber),
// unless the spec's max_rtt_ms is longer: a provider the limit admits must
// have the time to answer. A provider farther than this scores no RTT
// credit anyway (auction.RTTScale is half of it).
const DefaultRTTDeadline = 500 * time.Millisecond

// Where a round's RTT came from (QuoteOutcome.RTTSource,
// auction.Ranked.RTTSource).
const (
	RTTMeasured  = "measured"  // this round, by the Prober, alongside the quote
	RTTPeerstore = "peerstore" // Trust.RTT: the node's earlier measurements
)

// ReasonRTTNotMeasured prefixes the rejection of a bid whose provider's
// probe failed while the spec sets max_rtt_ms; the probe's error follows.
const ReasonRTTNotMeasured = "rtt not measured: "

// WithProber has each quoted candidate's RTT measured alongside its quote,
// waiting at most wait for the echo (DefaultRTTDeadline if wait <= 0). The
// default is no Prober: RTTs are Trust's alone.
func WithProber(p Prober, wait time.Duration) Option {
	return func(a *Auctioneer) { a.prober, a.rttWait = p, wait }
}

// probeWait is how long this round's probes wait: the Auctioneer's
// deadline, or the spec's limit if longer. The quote deadline bounds both.
func (a *Auctioneer) probeWait(spec *auction.JobSpec) time.Duration {
	w := a.rttWait
	if w <= 0 {
		w = DefaultRTTDeadline
	}
	return max(w, spec.Placement.MaxRTT)
}

// probe is one candidate's measurement: rtt, or why there is none.
type probe struct {
	rtt time.Duration
	err error
}

// measure probes provider within wait on the auctioneer's clock; the
// error of a probe cut off says how long it waited.
func (a *Auctioneer) measure(ctx context.Context, provider string, wait time.Duration) probe {
	ctx, cancel := withTimeout(a.clock, ctx, wait, fmt.Errorf("no answer in %v", wait))
	defer cancel()
	d, err := a.prober.MeasureRTT(ctx, provider)
	if cause := context.Cause(ctx); err != nil && cause != nil {
		err = cause // the deadline says more than the stream's error
	}
	if err == nil && d <= 0 {
		// Nothing answers before it is asked: a Prober that says so is
		// broken, and an RTT of zero would win every near-tie.
		err = errors.New("the probe measured no time")
	}
	return probe{rtt: d, err: err}
}

// roundRTT is one round's RTTs: measured where the probe answered, else
// Trust's; with max_rtt_ms set (strict), a failed probe leaves the RTT
// unknown rather than falling back to an older measurement, because the
// limit is a promise about the link as it is now. The maps are filled
// before the round reads them, so rtt is safe for concurrent use.
type roundRTT struct {
	trust    func(string) (time.Duration, bool)
	measured map[string]time.Duration
	failed   map[string]string // provider -> why its probe failed
	strict   bool
}

// newRoundRTT reads probes[i] as cands[i]'s; nil probes (no Prober) leave
// every RTT to trust.
func newRoundRTT(trust func(string) (time.Duration, bool), cands []*auction.Offer, probes []probe, strict bool) *roundRTT {
	r := &roundRTT{trust: trust, measured: map[string]time.Duration{}, failed: map[string]string{}, strict: strict}
	for i, p := range probes {
		if p.err != nil {
			r.failed[cands[i].Provider] = p.err.Error()
		} else {
			r.measured[cands[i].Provider] = p.rtt
		}
	}
	return r
}

func (r *roundRTT) rtt(provider string) (time.Duration, bool) {
	if d, ok := r.measured[provider]; ok {
		return d, true
	}
	if _, failed := r.failed[provider]; failed && r.strict {
		return 0, false
	}
	return r.trust(provider)
}

// source is where rtt's value for provider comes from; "" when unknown.
func (r *roundRTT) source(provider string) string {
	if _, ok := r.measured[provider]; ok {
		return RTTMeasured
	}
	if _, ok := r.rtt(provider); ok {
		return RTTPeerstore
	}
	return ""
}

// explain records, per quote and per ranked bid, the RTT the round used
// and its source, and names the failed probe in each rejection for an
// unknown RTT. It returns a copy of notAdmitted; ranked is marked in place.
func (r *roundRTT) explain(quotes []QuoteOutcome, notAdmitted []auction.Rejection, ranked []auction.Ranked) []auction.Rejection {
	for i := range quotes {
		q := &quotes[i]
		q.RTT, _ = r.rtt(q.Provider)
		q.RTTSource, q.RTTError = r.source(q.Provider), r.failed[q.Provider]
	}
	for i := range ranked {
		ranked[i].RTTSource = r.source(ranked[i].Bid.Provider)
	}
	out := slices.Clone(notAdmitted)
	for i, rej := range out {
		if why, failed := r.failed[rej.Provider]; failed && rej.Check == auction.CheckRTT && rej.Reason == auction.ReasonRTTUnknown {
			out[i].Reason = ReasonRTTNotMeasured + why
		}
	}
	return out
}

// preQuoteRTT is the RTT the feasibility check sees before any candidate
// is asked. Without a Prober it is trust's (the peerstore's), the only
// figure there is. With one, every candidate is measured while it quotes,
// and the peerstore's average also carries the DHT's requests (the
// remote's processing time) and old congestion: rejecting on it would shut
// a provider out for good, since one never quoted is never measured again.
// So it rejects there only a provider remembered as far beyond the limit
// (twice it), one not worth a quote slot; the limit itself is held, on the
// fresh measurement, when bids are admitted.
func (a *Auctioneer) preQuoteRTT(spec *auction.JobSpec) func(string) (time.Duration, bool) {
	limit := spec.Placement.MaxRTT
	if a.prober == nil || limit <= 0 {
		return a.trust.RTT
	}
	return func(p string) (time.Duration, bool) {
		d, ok := a.trust.RTT(p)
		if !ok || d <= 2*limit {
			return 0, false
		}
		return d, true
	}
}
