package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// UnknownMethod labels the JSON-RPC calls of a method not registered (or
// a request too broken to name one): clients choose method names, so only
// the server's own become labels.
const UnknownMethod = "unknown"

// Auction outcomes, as the renter's auctioneer ends a round.
const (
	AuctionAwarded = "awarded"  // a provider took the lease
	AuctionNoMatch = "no-match" // no provider could or would (the job's no-match state)
	AuctionFailed  = "failed"   // anything else: an award the book could not back, a bad spec
)

// Calls times what the node does on request: each JSON-RPC call by
// method, and each of the renter's auctions. These are observed as they
// end (one histogram observation each), not read at scrape time.
type Calls struct {
	rpc     *prometheus.HistogramVec
	rpcErrs *prometheus.CounterVec
	auction *prometheus.HistogramVec
}

// NewCalls registers the call series on reg.
func NewCalls(reg prometheus.Registerer) *Calls {
	c := &Calls{
		rpc: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "rpc_call_duration_seconds",
			Help:      "JSON-RPC calls (each call of a batch on its own; over HTTP and WebSocket) by method: time in the handler.",
			Buckets:   []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5, 30},
		}, []string{"method"}),
		rpcErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "rpc_call_errors_total",
			Help:      "JSON-RPC calls answered with an error, by method and error code class.",
		}, []string{"method", "class"}),
		auction: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "auction_duration_seconds",
			Help:      "The renter's auctions, from the request for quotes to the award or the giving up, by outcome.",
			Buckets:   []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"outcome"}),
	}
	reg.MustRegister(c.rpc, c.rpcErrs, c.auction)
	return c
}

// RPC records one call; method "" is UnknownMethod, code 0 a result. Its
// signature is node/rpc's CallObserver.
func (c *Calls) RPC(method string, d time.Duration, code int) {
	if method == "" {
		method = UnknownMethod
	}
	c.rpc.WithLabelValues(method).Observe(d.Seconds())
	if code != 0 {
		c.rpcErrs.WithLabelValues(method, ErrorClass(code)).Inc()
	}
}

// Auction records one auction round's duration and outcome.
func (c *Calls) Auction(d time.Duration, outcome string) {
	c.auction.WithLabelValues(outcome).Observe(d.Seconds())
}

// ErrorClass names a JSON-RPC error code's class: the spec's five by name,
// "rpc" for the RPC layer's own (-32001..-32009: auth, WebSocket,
// budgets), "application" for the node's (-32010 and below) and anything
// else. A fixed set, so a label.
func ErrorClass(code int) string {
	switch {
	case code == -32700:
		return "parse_error"
	case code == -32600:
		return "invalid_request"
	case code == -32601:
		return "method_not_found"
	case code == -32602:
		return "invalid_params"
	case code == -32603:
		return "internal_error"
	case code <= -32001 && code >= -32009:
		return "rpc"
	}
	return "application"
}
