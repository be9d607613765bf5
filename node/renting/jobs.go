// Package renting is the renter's side of batch jobs: it records a
// submitted job, runs its auction (auction/renter), starts and follows it
// on the winner, pays as it runs, checks its answer, telemetry and charge,
// and keeps its record and output in node.db (node/store) across
// restarts. The node wires it (node/node_jobs.go) and serves it over RPC
// (node/api_job.go); a service's replicas are jobs of this package too,
// which node's services keep.
package renting

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/journal"
	"github.com/gleaner-net/gleaner/node/metrics"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"gopkg.in/yaml.v3"
)

// Application error codes of the job namespace (see docs/RPC.md), which
// node/api_job.go serves; an invalid service spec is CodeBadJobSpec too.
const (
	CodeBadJobSpec = -32020 // the job spec is invalid; the message names line and field
	CodeNoSuchJob  = -32021 // no job with that ID on this node
)

// Job states, in the order a job normally passes through them.
const (
	StateAuction    = "auction"
	StateLeased     = "leased"
	StateReserved   = "reserved" // gold: leased, waiting for its window
	StateFetching   = "fetching" // the provider fetches the job's inputs; not billed
	StatePulling    = "pulling"
	StateRunning    = "running"
	StatePreempting = "preempting"
	StatePaused     = "paused" // the provider paused it: payment is late
	StateCompleted  = "completed"
	StateFailed     = "failed"
	StateCancelled  = "cancelled"
	StateNoMatch    = "no-match"
)

// Terminal reports whether a job in state has ended for good.
func Terminal(state string) bool {
	switch state {
	case StateCompleted, StateFailed, StateCancelled, StateNoMatch:
		return true
	}
	return false
}

// JobRecord is the renter's durable view of one job, kept in node.db as
// JSON. Its amounts are micro-credits under keys of their own
// (lease_price, paid_total; the explain's bid_price and clearing): records
// written by 0.1 nodes carried float credits under price, paid, bid and
// clearing_price, which are now ignored, so an old record loads with its
// amounts absent instead of failing the start or reading as a price a
// million times too small. The lease bytes and vouchers it keeps carry the
// real amounts either way.
type JobRecord struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	State     string          `json:"state"`
	Spec      string          `json:"spec"`
	Created   time.Time       `json:"created"`
	Updated   time.Time       `json:"updated"`
	Provider  string          `json:"provider,omitempty"`
	LeaseCID  string          `json:"lease_cid,omitempty"`
	Price     auction.Credits `json:"lease_price,omitempty" doc:"the cleared price: micro-credits (auction.Credits; 1 credit = 1000000) per GPU-hour"`
	GPUs      int             `json:"gpus"`
	Simulated bool            `json:"simulated"`
	ExitCode  *int            `json:"exit_code,omitempty"`
	Error     string          `json:"error,omitempty"`
	Explain   *renter.Explain `json:"explain,omitempty"`
	Lease     []byte          `json:"lease,omitempty"` // co-signed lease bytes
	// Reserved is a gold lease's window start: the job waits for it.
	Reserved  *time.Time      `json:"reserved_start,omitempty"`
	StartedAt *time.Time      `json:"started_at,omitempty"`
	EndedAt   *time.Time      `json:"ended_at,omitempty"`
	Attempts  int             `json:"attempts"` // leases taken so far (re-auctions + 1)
	PullMS    int64           `json:"pull_ms,omitempty"`
	Paid      auction.Credits `json:"paid_total" doc:"micro-credits (auction.Credits) promised in this run's signed vouchers so far"`
	Vouchers  int             `json:"vouchers"` // vouchers sent in the current run
	// LastVoucher is the newest voucher of the current run: the renter's
	// proof of what it paid, cited in its outcome entry.
	LastVoucher []byte `json:"last_voucher,omitempty"`
	// What the current run was charged of Paid. Vouchers pay an interval
	// ahead; the provider's settlement charges the billed running time to
	// the second and refunds the rest. Its figure (Charged, from the exit
	// event) is checked against this node's own bound (ChargeBound: the
	// lease price for the time from StartSent, or the lease's window start
	// if later, to the exit, within Paid); Refunded is Paid - Charged when
	// it is within the bound, and ChargeDisputed says when it is not.
	// BilledLease is the lease CID these fields belong to.
	BilledLease    string           `json:"billed_lease,omitempty"`
	StartSent      *time.Time       `json:"start_sent,omitempty"` // when this node asked the provider to start the run
	Charged        *auction.Credits `json:"charged,omitempty" doc:"micro-credits (auction.Credits) the provider's settlement says it charged of paid_total, as it reported it; trust it only if charge_disputed is false"`
	Refunded       auction.Credits  `json:"refunded,omitempty" doc:"micro-credits (auction.Credits): paid_total - charged, the prepaid part refunded (set only when the charge is within this node's bound)"`
	ChargeBound    auction.Credits  `json:"charge_bound,omitempty" doc:"micro-credits (auction.Credits): the most this node's own reckoning lets the provider charge for the run"`
	ChargeDisputed bool             `json:"charge_disputed,omitempty"` // the provider's charge exceeds ChargeBound
	// Telemetry summarises the signed samples of the current run.
	Telemetry *ledger.TelemetrySummary `json:"telemetry,omitempty"`
	// Output is the sha256 of the job's stdout, as its provider reported.
	Output string `json:"output_sha256,omitempty"`
	// Outputs is the CID of the job's results (its spec's outputs), as
	// its provider's settlement names them: `gleaner job fetch` gets them.
	Outputs string `json:"outputs,omitempty"`
	// Verified is the outcome of verify: in the spec: passed, failed,
	// inconclusive or "not compared"; empty until decided.
	Verified string `json:"verified,omitempty"`
	// Group and Replicas tie the replicas of one verify.replicas job
	// together: each runs on a different provider.
	Group    string   `json:"group,omitempty"`
	Replicas []string `json:"replicas,omitempty"`
	// Provider pinning: the job may only be awarded to this peer (canaries,
	// or `job run --provider`).
	Pin string `json:"pin,omitempty"`
	// Canary marks a known-answer job this node scheduled on its own.
	Canary bool `json:"canary,omitempty"`
	// Service names the service this job is a replica of: the service's
	// replicas form one auction group (no two share a provider), never
	// compared as verify replicas are.
	Service string `json:"service,omitempty"`
	// Avoid are providers this job's auctions never ask: a replacement
	// replica's, the provider its predecessor was lost with.
	Avoid []string `json:"avoid,omitempty"`
	// Life is what the job's lifecycle has learnt of its runs
	// (renter.Snapshot), kept while the job goes on: a node restarted
	// while the job waits in a re-auction rebuilds it and auctions again
	// from the job's checkpoint (wait.go).
	Life *renter.Snapshot `json:"lifecycle,omitempty"`
	// Secrets: the job was submitted with secrets or registry
	// credentials, which live in memory only, so a restarted node cannot
	// start it on a new provider.
	Secrets bool `json:"secrets,omitempty"`
	// Array and Shard: the job is shard Shard of job array Array
	// (array.go).
	Array string `json:"array,omitempty"`
	Shard *int   `json:"shard,omitempty"`
	// Gang and GangRank: the job is member GangRank of gang Gang
	// (gang.go).
	Gang     string `json:"gang,omitempty"`
	GangRank *int   `json:"gang_rank,omitempty"`
	// GangView is set only on the view of a gang itself (ID the gang's):
	// its members and one total spend (gang_view.go; not stored).
	GangView *GangView `json:"gang_view,omitempty"`
	// ArrayView is set only on the view of an array itself (ID the
	// array's): its shards' progress (array_view.go; not stored).
	ArrayView *ArrayView `json:"array_view,omitempty"`
	// PriceWhy is what set Price: the clearing rule and its numbers
	// (job_status fills it from the round's explain; not stored).
	PriceWhy *renter.Clearing `json:"price_why,omitempty"`
	// ProviderPath is how this node reaches the provider now: direct,
	// relayed (through a circuit relay: a provider behind a NAT that hole
	// punching could not cross), or empty when not connected (job_status
	// fills it; not stored).
	ProviderPath string `json:"provider_path,omitempty"`
}

// errStopping: the node is stopping and starts no more jobs. A job
// recorded meanwhile is failed at the next start, as any job caught in
// its auction by a stop is.
var errStopping = errors.New("this node is stopping")

// SubmitOptions are job_submit's options beyond the spec.
type SubmitOptions struct {
	Provider string // award only to this provider
	Canary   bool
	// RegistryAuth: the image's registry credentials, kept in memory
	// only (like secrets) and sent with the start to the winner.
	RegistryAuth *wire.RegistryAuth
	// Service: the job is a replica of this service (JobRecord.Service).
	Service string
	// Avoid: providers never to ask (JobRecord.Avoid).
	Avoid []string
}

// JobEvent is what job_follow streams: state changes and log output.
type JobEvent struct {
	JobID string    `json:"job_id"`
	Type  string    `json:"type"` // "state", "log", or "dropped" (the follower fell behind; the last event)
	State string    `json:"state,omitempty"`
	Note  string    `json:"note,omitempty"`
	Log   string    `json:"log,omitempty"`
	Time  time.Time `json:"time"`
}

// Jobs runs the renter's side: auctions, leases, following jobs.
type Jobs struct {
	m     *offers.Market
	store *store.Store
	key   crypto.PrivKey
	log   *slog.Logger
	bg    context.Context
	rtt   func(string) (time.Duration, bool)
	// auc runs the auctions (auction/renter) over this node's streams,
	// book and trust.
	auc *renter.Auctioneer
	// own is the book the auctions choose from: the market's, corrected
	// by the array shards' own leases and exits before their providers
	// republish (renter.OwnView); nil without a market.
	own *renter.OwnView
	// auctionGroups are the replica groups by name; guarded by mu.
	auctionGroups map[string]*renter.Group

	journal *journal.Journal   // appends to this node's feed, in order
	spawn   func(func()) bool  // runs a goroutine Stop waits for (Node.tasks.Go); false once stopping
	rep     auction.Reputation // computed from the replicated ledger
	claims  *Reputation        // hardware claims and convictions; nil in unit tests

	billing         time.Duration // the billing interval written into leases
	stopPayingAfter int           // fault injection: stop after this many vouchers (0 = never)
	// beforeStart is fault injection: called with the job and provider
	// before a lease's first start is sent (nil: never), so that a test
	// can have the provider give the award away first.
	beforeStart func(jobID, provider string)
	// reattachFor, when not 0, replaces the bounds of coming back to a
	// lost provider (InjectReattachFor).
	reattachFor time.Duration

	canary *canaryPlan   // known-answer jobs this node schedules; nil: none
	access InputAccess   // grants a lease's provider the job's inputs; nil: none (unit tests)
	split  InputSplitter // deals an array's input over its shards; nil: none (unit tests)

	// runShard starts a shard's job (nil: run, its auction and all);
	// a test of arrays alone replaces it.
	runShard func(id string, spec *auction.JobSpec, specYAML []byte, secrets map[string]string)

	// auctionTimer times each auction when the node's metrics are on
	// (TimeAuctions, from node/node_metrics.go); nil otherwise.
	auctionTimer atomic.Pointer[metrics.Calls]

	resuming []string // leased when this node last stopped: resume follows them again
	waiting  []string // waiting in a re-auction when this node last stopped: resume auctions them again

	// registryAuth are the credentials of jobs submitted with them, in
	// memory only, by job ID; guarded by mu.
	registryAuth map[string]*wire.RegistryAuth

	mu     sync.Mutex // guards jobs, logs, subs, groups, registryAuth, arrays
	groups map[string]*sync.Mutex
	jobs   map[string]*JobRecord
	arrays map[string]*arrayRun // job arrays by ID (array.go)
	gangs  map[string]*gangRun  // gangs by ID (gang.go)
	logs   map[string]*jobLog   // retained output, persisted in batches (logs.go)
	subs   map[string][]chan JobEvent

	logFlush sync.Mutex // serialises the writes of logs to the store
}

// Deps is everything the renter's job manager works with. It is
// built with all of them: nothing is filled in once it runs.
type Deps struct {
	Bg      context.Context // the node's background context
	Market  *offers.Market  // nil in unit tests: no auctioneer
	Store   *store.Store
	Key     crypto.PrivKey
	Log     *slog.Logger
	Journal *journal.Journal  // nil in unit tests
	Spawn   func(func()) bool // Node.tasks.Go; nil: a plain goroutine
	Rep     *Reputation       // nil in unit tests
	Billing time.Duration
	// StopPayingAfter is fault injection: stop after this many vouchers.
	StopPayingAfter int
	// CanarySpec is the known-answer job's spec file (trust.canary_spec,
	// an absolute path; "": no canaries), sent with an award at no less
	// than CanaryMinRate (CanaryRate).
	CanarySpec    string
	CanaryMinRate float64
	// Access grants a lease's provider the job's inputs (access.go); nil
	// in unit tests.
	Access InputAccess
	// Split deals an array's input over its shards (array_split.go);
	// nil: arrays with array.split are refused.
	Split InputSplitter
}

// New is the renter's job manager, with the jobs of the last run loaded
// from d.Store; Resume follows them again once the node is wired.
func New(d Deps) (*Jobs, error) {
	canary, err := loadCanary(d.CanarySpec, d.CanaryMinRate)
	if err != nil {
		return nil, err
	}
	m := d.Market
	r := &Jobs{m: m, store: d.Store, key: d.Key, log: d.Log, bg: d.Bg, journal: d.Journal, spawn: d.Spawn,
		billing: d.Billing, stopPayingAfter: d.StopPayingAfter, canary: canary, access: d.Access, split: d.Split,
		jobs: map[string]*JobRecord{}, arrays: map[string]*arrayRun{}, gangs: map[string]*gangRun{}, logs: map[string]*jobLog{}, subs: map[string][]chan JobEvent{}, registryAuth: map[string]*wire.RegistryAuth{}}
	if r.spawn == nil {
		r.spawn = func(f func()) bool { go f(); return true }
	}
	if d.Rep != nil { // a nil *Reputation in the interface would not read as none
		r.rep, r.claims = d.Rep, d.Rep
	}
	r.rtt = func(p string) (time.Duration, bool) { return PeerRTT(m, p) }
	if m != nil {
		if err := r.newAuctioneer(); err != nil {
			return nil, err
		}
	}
	var resume, waiting []string
	err = d.Store.ForEach(store.BucketJobs, func(key string, raw []byte) error {
		var j JobRecord
		if err := json.Unmarshal(raw, &j); err != nil {
			return err
		}
		switch {
		case Terminal(j.State):
		case j.Gang != "":
			// A gang's member is its gang's to stop or place again
			// (resumeGangs), never followed or re-auctioned alone.
		case j.State == StateAuction && j.Service == "" && (j.Life != nil || !j.Canary && j.Group == ""):
			// In an auction when the node stopped: waiting in a
			// re-auction (preempted, say), or still in its first. It
			// goes on, from its checkpoint if it has one, unless it needs
			// what was never stored. (A service's replica is its
			// keeper's to replace; a canary and a compared replica group
			// are this node's checks, started again by what starts them.)
			if j.Secrets {
				j.State, j.Error = StateFailed, "this node restarted while the job waited to be auctioned; its secrets were never stored: resubmit the job"
			} else {
				waiting = append(waiting, j.ID)
			}
		case len(j.Lease) > 0:
			resume = append(resume, j.ID) // leased: follow it again
		default:
			j.State, j.Error = StateFailed, "this node restarted during the auction; resubmit the job"
		}
		r.jobs[j.ID] = &j
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.resuming, r.waiting = resume, waiting
	if err := r.loadArrays(); err != nil {
		return nil, err
	}
	if err := r.loadGangs(); err != nil {
		return nil, err
	}
	return r, r.loadLogs()
}

// Resume follows again, once r is wired, the jobs that were leased when
// this node last stopped.
func (r *Jobs) Resume() {
	r.spawn(r.flushLogsLoop)
	for _, id := range r.resuming {
		r.spawn(func() { r.reattach(id) })
	}
	for _, id := range r.waiting {
		r.spawn(func() { r.reauction(id) })
	}
	r.resuming, r.waiting = nil, nil
	r.resumeArrays()
	r.resumeGangs()
}

// Submit parses and records a job, then runs its auction in the background.
// A spec with verify.replicas N becomes N jobs (ID-r1..ID-rN), each run on
// a different provider; the first is returned, naming the others.
func (r *Jobs) Submit(specYAML []byte, secrets map[string]string, opt SubmitOptions) (*JobRecord, error) {
	spec, err := auction.ParseJobSpec(specYAML)
	if err != nil {
		return nil, err
	}
	if spec.StartWasRelative() {
		// "start: +2h" means now plus two hours once: the job keeps, and
		// its providers are sent, the instant it was resolved to.
		if specYAML, err = yaml.Marshal(spec); err != nil {
			return nil, err
		}
	}
	if opt.Provider != "" {
		if _, err := peer.Decode(opt.Provider); err != nil {
			return nil, fmt.Errorf("%w: provider: %v", auction.ErrBadJobSpec, err)
		}
	}
	if spec.Shard != nil {
		return nil, fmt.Errorf("%w: shard: written by this node into each shard of an array; submit the array (array: {shards: N})", auction.ErrBadJobSpec)
	}
	if spec.Array != nil {
		return r.submitArray(spec, specYAML, secrets, opt)
	}
	if spec.GangOf != nil {
		return nil, fmt.Errorf("%w: gang_of: written by this node into each member of a gang; submit the gang (gang: {members: N})", auction.ErrBadJobSpec)
	}
	if spec.Gang != nil {
		return r.submitGang(spec, specYAML, secrets, opt)
	}
	base := spec.Name + "-" + hex.EncodeToString(randomNonce()[:6])
	ids := []string{base}
	if n := spec.Verify.Replicas; n > 1 {
		if opt.Provider != "" {
			return nil, fmt.Errorf("%w: verify.replicas runs on %d different providers; it cannot be pinned to one", auction.ErrBadJobSpec, n)
		}
		// Unrelated IDs: a provider must not tell a replica from any
		// other job (the group is this node's bookkeeping only).
		ids = ids[:0]
		for range n {
			ids = append(ids, spec.Name+"-"+hex.EncodeToString(randomNonce()[:6]))
		}
	}
	now := time.Now().UTC()
	for _, id := range ids {
		j := &JobRecord{ID: id, Name: spec.Name, State: StateAuction, Spec: string(specYAML), Created: now, Updated: now,
			GPUs: spec.Resources.GPUs, Pin: opt.Provider, Canary: opt.Canary,
			Service: opt.Service, Avoid: opt.Avoid, Secrets: len(secrets) > 0 || opt.RegistryAuth != nil}
		if len(ids) > 1 {
			j.Group, j.Replicas = base, ids
		}
		r.mu.Lock()
		r.jobs[id] = j
		r.logs[id] = &jobLog{}
		r.mu.Unlock()
		if err := r.save(j); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		if opt.RegistryAuth != nil {
			r.mu.Lock()
			r.registryAuth[id] = opt.RegistryAuth
			r.mu.Unlock()
		}
		if !r.spawn(func() { r.run(id, spec, specYAML, secrets, nil) }) {
			return nil, errStopping
		}
	}
	return r.Get(ids[0])
}

func (r *Jobs) Get(id string) (*JobRecord, error) {
	r.mu.Lock()
	j, ok := r.jobs[id]
	run, gang := r.arrays[id], r.gangs[id]
	if ok {
		c := *j
		r.mu.Unlock()
		return &c, nil
	}
	r.mu.Unlock()
	if run != nil {
		return r.arrayView(run), nil // takes run.mu before r.mu, as the driver does
	}
	if gang != nil {
		return r.gangView(gang), nil
	}
	return nil, fmt.Errorf("no job %q (see `gleaner job ls`)", id)
}

// Snapshot is a copy of every job keep admits (nil: all), taken under the
// lock: the one way readers outside the job manager (the RPC, metrics,
// spend, services) see the jobs, so none of them holds r.mu.
func (r *Jobs) Snapshot(keep func(j *JobRecord) bool) []JobRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]JobRecord, 0, len(r.jobs))
	for _, j := range r.jobs {
		if keep == nil || keep(j) {
			out = append(out, *j)
		}
	}
	return out
}

// update changes a job under the lock, persists it and tells followers.
func (r *Jobs) update(id string, note string, f func(j *JobRecord)) {
	r.mu.Lock()
	j := r.jobs[id]
	prev := j.State
	f(j)
	j.Updated = time.Now().UTC()
	c := *j
	r.mu.Unlock()
	if err := r.save(&c); err != nil {
		r.log.Error("job record not saved", "job", id, "err", err)
	}
	if c.State != prev {
		r.wakeArray(&c)
	}
	if c.State != prev {
		// One line per transition in the daemon's log, for owners who
		// watch logs rather than RPC.
		r.log.Info("job state", "job", id, "from", prev, "to", c.State, "provider", c.Provider, "note", note)
	}
	if c.State != prev || note != "" {
		r.publish(JobEvent{JobID: id, Type: "state", State: c.State, Note: note, Time: time.Now().UTC()})
	}
}

func (r *Jobs) save(j *JobRecord) error {
	return r.store.Update(func(tx *store.Tx) error { return tx.Put(store.BucketJobs, j.ID, j) })
}

// followQueue is how many events a follower (an RPC subscription) may
// have waiting: with log events of at most maxLogChunk, 4 MiB at most.
const followQueue = 256

func (r *Jobs) publish(ev JobEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	subs := r.subs[ev.JobID]
	live := subs[:0]
	for _, ch := range subs {
		if len(ch) >= followQueue {
			// A follower that cannot keep up is dropped with a notice
			// (the last place in its queue is kept for it) rather than
			// buffered without bound or silently missing output.
			ch <- JobEvent{JobID: ev.JobID, Type: "dropped", Note: fmt.Sprintf("this follower fell %d events behind and was dropped; `gleaner job logs %s` shows the retained output", followQueue, ev.JobID), Time: time.Now().UTC()}
			close(ch)
			continue
		}
		ch <- ev
		live = append(live, ch)
	}
	if len(live) == 0 {
		delete(r.subs, ev.JobID)
	} else {
		r.subs[ev.JobID] = live
	}
	if ev.Type == "state" && Terminal(ev.State) {
		for _, ch := range r.subs[ev.JobID] {
			close(ch)
		}
		delete(r.subs, ev.JobID)
	}
}

// Follow returns a channel of the job's events from now on; it closes when
// the job ends or ctx does.
func (r *Jobs) Follow(ctx context.Context, id string) (<-chan JobEvent, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j, ok := r.jobs[id]
	if !ok {
		return nil, fmt.Errorf("no job %q", id)
	}
	ch := make(chan JobEvent, followQueue+1) // +1: the place for a drop notice
	if Terminal(j.State) {
		ch <- JobEvent{JobID: id, Type: "state", State: j.State, Note: j.Error, Time: j.Updated}
		close(ch)
		return ch, nil
	}
	r.subs[id] = append(r.subs[id], ch)
	go func() {
		<-ctx.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
		subs := r.subs[id]
		for i, c := range subs {
			if c == ch {
				r.subs[id] = append(subs[:i], subs[i+1:]...)
				close(ch)
				return
			}
		}
	}()
	return ch, nil
}

// DealsWith: author is the provider of one of this renter's jobs.
func (r *Jobs) DealsWith(author string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		if j.Provider == author || j.Pin == author {
			return true
		}
	}
	return false
}

func randomNonce() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}
