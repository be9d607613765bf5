// Package metrics serves a node's Prometheus metrics: a registry of its
// own (never the global default one, so that several nodes in one process
// do not collide), a collector that reads the node's state at scrape time
// (Snapshot), the RPC API's HTTP latency histogram (RPC), per-method call
// and auction timings (Calls) and the /metrics listener (Server).
//
// The collector instruments nothing: every gauge is read from state the
// node keeps anyway, and the traffic counters from the atomic counts the
// p2p host keeps, when Prometheus asks, so the hot paths of the other
// packages pay at most an atomic add for metrics. Only Calls observes as
// things happen, once per call or auction.
package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every series of gleaner's own.
const Namespace = "gleaner"

// NewRegistry is a node's registry, with the Go runtime's and the
// process's collectors and gleaner_build_info.
func NewRegistry(version, network string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace:   Namespace,
			Name:        "build_info",
			Help:        "Always 1; its labels say which gleaner release runs, on which network, built with which Go.",
			ConstLabels: prometheus.Labels{"version": version, "network": network, "go_version": runtime.Version()},
		}, func() float64 { return 1 }),
	)
	return reg
}
