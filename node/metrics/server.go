package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// RPC measures the JSON-RPC API's HTTP requests. The JSON-RPC method is
// inside the body, so requests are told apart by HTTP status only; a
// WebSocket subscription, which lasts as long as its client stays, is
// counted as an open connection rather than timed.
type RPC struct {
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	ws       prometheus.Gauge
}

// NewRPC registers the RPC series on reg.
func NewRPC(reg prometheus.Registerer) *RPC {
	r := &RPC{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "rpc_request_duration_seconds",
			Help:      "JSON-RPC HTTP requests (POST /, batches included) by HTTP status: time to the full response.",
			Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace,
			Name:      "rpc_requests_in_flight",
			Help:      "JSON-RPC HTTP requests being served now (WebSocket connections not included).",
		}),
		ws: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace,
			Name:      "rpc_websocket_connections",
			Help:      "Open JSON-RPC WebSocket connections (subscriptions).",
		}),
	}
	reg.MustRegister(r.duration, r.inFlight, r.ws)
	return r
}

// Wrap instruments h, the RPC API's handler.
func (r *RPC) Wrap(h http.Handler) http.Handler {
	timed := promhttp.InstrumentHandlerInFlight(r.inFlight, promhttp.InstrumentHandlerDuration(r.duration, h))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if isUpgrade(req) {
			r.ws.Inc()
			defer r.ws.Dec()
			h.ServeHTTP(w, req) // untouched: the upgrade hijacks w
			return
		}
		timed.ServeHTTP(w, req)
	})
}

func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// Server serves /metrics, and nothing else, on a listener of its own.
type Server struct {
	srv *http.Server
	url string
}

// Listen starts serving reg at http://addr/metrics.
func Listen(addr string, reg *prometheus.Registry, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: cannot listen on %s: %w (pick another with --metrics 127.0.0.1:0)", addr, err)
	}
	return Serve(ln, reg, log), nil
}

// Serve serves reg at /metrics on ln.
func Serve(ln net.Listener, reg *prometheus.Registry, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(reg))
	s := &Server{
		url: "http://" + ln.Addr().String() + "/metrics",
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
		},
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	return s
}

// Handler is reg's /metrics handler; promhttp_metric_handler_* count its
// scrapes.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		MaxRequestsInFlight: 4,
	}))
}

// URL is the scrape URL, http://host:port/metrics.
func (s *Server) URL() string { return s.url }

// Shutdown stops the listener; scrapes in flight finish until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }
