package service

import (
	"maps"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Healing's bounds: after HealLimit replicas in a row that ended without
// ever passing their readiness check, no more are placed (the spec is to
// blame, not the providers); replacements in such a run, or after
// replicas no provider took, wait Config.HealStep doubled for each, up to
// HealBackoffMax.
const (
	HealLimit      = 4
	HealBackoffMax = 30 * time.Second
)

// SyncEvery is how often the node is meant to Tick a service's reconciler,
// and healing's first back-off step by default.
const SyncEvery = time.Second

// HealBackoff is the wait before the next replacement after n in a row
// that never got ready, or that no provider took: step doubled for each,
// up to HealBackoffMax.
func HealBackoff(step time.Duration, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	if n > 16 {
		return HealBackoffMax // and no shift past the duration's bits
	}
	return min(step<<n, HealBackoffMax)
}

// Record is the part of a service's durable record the reconciler owns
// and changes; the node keeps it (its ServiceRecord), writes it when a
// Tick says Save or a placement succeeded, and hands it back to New after
// a restart.
type Record struct {
	// Replicas are the replica jobs' IDs, by index: replica 0 first, the
	// floor's replicas leading.
	Replicas []string
	// Notes says, by job ID, why each replica replaced or renewed another.
	Notes map[string]string
	// Replaced counts the replicas replaced; Renewed the leases renewed
	// (a successor took over before the lease's end).
	Replaced, Renewed int
	// Unready counts the replicas in a row that ended without ever being
	// ready; at HealLimit healing stops, with HealError saying why.
	Unready   int
	HealError string
	// Renewing maps a replica's job to the successor placed to take its
	// index before its lease ends.
	Renewing map[string]string
	// NotPlaced says why no replica is placed, once every replica index
	// has had an attempt end without a provider running it; cleared when
	// a replica is placed.
	NotPlaced string
}

// clone is a deep copy of r, its empty maps nil (as the store keeps them).
func (r Record) clone() Record {
	r.Replicas = slices.Clone(r.Replicas)
	r.Notes = maps.Clone(r.Notes)
	r.Renewing = maps.Clone(r.Renewing)
	if len(r.Notes) == 0 {
		r.Notes = nil
	}
	if len(r.Renewing) == 0 {
		r.Renewing = nil
	}
	return r
}

// Successors are the pending successors' job IDs, sorted.
func (r Record) Successors() []string { return slices.Sorted(maps.Values(r.Renewing)) }

// Phase is where a replica's job stands, as the reconciler tells them
// apart.
type Phase int

const (
	// Pending: on its way to running (in auction, leased, its inputs or
	// image being fetched).
	Pending Phase = iota
	// Running: its container runs on its provider.
	Running
	// Holding: a provider holds it without running it now (a gold window
	// reserved, a preemption under way, paused for a late payment); it is
	// placed.
	Holding
	// NoMatch: ended, no provider took it.
	NoMatch
	// Failed: ended failed (lost with its provider, or it could not start).
	Failed
	// Done: ended otherwise (completed, cancelled).
	Done
)

// Ended reports whether a job in phase p has ended.
func (p Phase) Ended() bool { return p >= NoMatch }

// Placed reports whether a provider runs, or holds, a job in phase p.
func (p Phase) Placed() bool { return p == Running || p == Holding }

// Job is what the node observed of one replica's (or successor's) job.
type Job struct {
	Phase Phase
	// State is the node's word for it ("running", "no-match"), for people.
	State    string
	Provider string // the provider of its latest lease; "" before one
	Error    string // why it ended, or why its last auction round failed
	Started  bool   // a provider ever started it
	Updated  time.Time
	// Lease is its current lease (zero: none readable).
	Lease Lease
	// Serving is when its current run was added to the gateway (zero: it
	// is not in the gateway).
	Serving time.Time
	// Why says, for a person, how it stands: its state, its error and,
	// for a no-match, the providers' reasons ("ended no-match: ...").
	Why string
}

// Lease is a job's current lease, as renewal needs it.
type Lease struct {
	CID        string
	Start, End time.Time
}

// Replica is one replica in the gateway.
type Replica struct {
	ID    string
	Ready bool // its readiness check passes now
}

// Observed is what the node saw just before a Tick.
type Observed struct {
	// Scale is the count service_scale fixed (0: the spec's, or the
	// autoscaler's).
	Scale int
	// Jobs are the replicas' and successors' jobs (Members), by ID; one
	// absent is gone.
	Jobs map[string]Job
	// Gateway are the replicas in the gateway, with the service's QPS and
	// requests in flight.
	Gateway     []Replica
	QPS         float64
	Outstanding int64
}

// Config holds the reconciler's timings; zero fields take their defaults.
type Config struct {
	// ReadyGrace: how long past readiness.initial_delay a running replica
	// may go without being ready before it is given up (SettleMax).
	ReadyGrace time.Duration
	// HealStep: healing back-off's first wait (SyncEvery).
	HealStep time.Duration
}

// Reconciler keeps one service's replicas. It is not safe for concurrent
// use: one goroutine (the node's keeper) owns it.
type Reconciler struct {
	name string
	spec *auction.JobSpec
	cfg  Config
	rec  Record
	as   *autoscaler

	everReady map[string]bool   // job IDs seen ready
	gaveUp    map[string]string // job ID -> why it was cancelled as never ready
	nextHeal  time.Time         // no replacement before (the back-off)
	noMatches int               // replacements in a row for replicas no provider took
	// renewTried: the leases (CIDs) a successor was placed for, so that
	// one that failed is not placed again and again before the lease ends.
	renewTried map[string]bool
	// unplaced: replica index -> its latest attempt that ended without
	// being placed, since a replica last was.
	unplaced map[int]unplacedEnd
}

// unplacedEnd is a replica attempt that ended without being placed.
type unplacedEnd struct {
	job string
	why string
	at  time.Time
}

// New returns the reconciler of service name, whose spec (a service's:
// spec.Service is set) is spec, starting from rec (a new service's, or
// the one kept over a restart).
func New(name string, spec *auction.JobSpec, rec Record, cfg Config) *Reconciler {
	if cfg.ReadyGrace <= 0 {
		cfg.ReadyGrace = SettleMax
	}
	if cfg.HealStep <= 0 {
		cfg.HealStep = SyncEvery
	}
	return &Reconciler{name: name, spec: spec, cfg: cfg, rec: rec.clone(), as: newAutoscaler(*spec.Service),
		everReady: map[string]bool{}, gaveUp: map[string]string{}, renewTried: map[string]bool{}, unplaced: map[int]unplacedEnd{}}
}

// Record returns a copy of the service's record as the reconciler has it.
func (r *Reconciler) Record() Record { return r.rec.clone() }

// Members are the jobs the node observes for a Tick: the replicas, then
// the pending successors.
func (r *Reconciler) Members() []string {
	return append(slices.Clone(r.rec.Replicas), r.rec.Successors()...)
}
