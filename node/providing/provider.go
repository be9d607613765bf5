package providing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/gangnet"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Provider is the provider's side of a rental over libp2p, bbolt and
// Docker. The market logic (which GPUs a bid names, claims, preemption,
// start-once, expiry, billing) is the scheduler's (auction/provider);
// this adapter quotes and accepts over streams, persists lease states,
// runs containers and carries out the actions the scheduler returns.
type Provider struct {
	p            Offers
	self         string // this provider's peer ID, its key's
	network      string // the market's network name (the host's)
	store        Store
	key          crypto.PrivKey
	exec         executor.Executor // nil: this node cannot run jobs, so it never bids
	gangs        GangNet           // Config.Gangs
	data         Data              // nil: jobs with inputs fail to start, outputs are not kept
	retention    time.Duration     // how long outputs are kept (Config.OutputRetention)
	inputTimeout time.Duration     // bounds fetchInputs (Config.InputFetchTimeout)
	maxInput     int64             // bounds a job's inputs (Config.MaxJobInput)
	reserve      int64             // disk the inputs leave free (Config.DiskReserve)
	// freeDisk: Config.FreeDisk.
	freeDisk func(context.Context) (store, volumes int64, err error)
	sched    *sched.Scheduler
	// wrongAnswers: fault injection (Config.WrongAnswers).
	wrongAnswers bool
	engine       auction.BidEngine
	log          *slog.Logger
	bg           context.Context
	tag          string                           // prefixes this node's executor job IDs
	gpus         attest.Source                    // read for telemetry; nil when the node has no GPUs
	record       func(typ string, payload []byte) // journals to this node's ledger feed
	recordAll    func(typ string, payloads [][]byte)
	awards       awardQueue    // accept's group commit (awardbatch.go)
	kick         chan struct{} // wakes the tick loop (a voucher arrived, a lease ended)
	spawn        func(func())  // runs a lease's follower where the node's Stop waits for it
	onService    func(jobID string, renter peer.ID, addr netip.AddrPort)
	onServiceEnd func(jobID string)
	// onServiceDrain: Config.OnServiceDrain, nil when not set.
	onServiceDrain func(jobID string)
	dead           atomic.Bool // SimulateCrash: write nothing, touch no container
	// stopping: Shutdown has begun; no more quotes, awards or launches.
	// Set under mu, where launches begin (see launching.go).
	stopping   atomic.Bool
	launchHook atomic.Pointer[func(jobID string)] // SetLaunchHook, for tests
	pullHook   atomic.Pointer[func(jobID string)] // SetPullHook, for tests
	tails      endTails                           // the output's tail of runs that ended, for a late attach (endtail.go)

	// The lease state has one owner, the scheduler (sched): whether a
	// lease is held, awarded, started, launched, running, paused, ending
	// or superseded is its, behind its own mutex, and read here in
	// snapshots (sched.Lease, sched.Leases). The records (Store) are
	// written from it, outside every lock. What the adapter keeps is I/O:
	// mu guards the map of each held lease's handles, each activeLease's
	// job, meter and starting (see there), and begins; nothing under mu
	// writes to disk, sends on a stream or calls the scheduler.
	mu     sync.Mutex
	leases map[string]*activeLease // the handles of the leases the scheduler holds, by job ID
	begins time.Duration           // how long a created job takes to begin, averaged
}

// Offers is what the provider reads of its own offer: the node's offer
// publisher (offers.Publisher) is one; tests hand it a fixed offer.
type Offers interface {
	// Current is the offer as last signed; nil while there is none.
	Current() *auction.Offer
	// Settings are the owner's (the policy's egress rule is read at start).
	Settings() offers.Settings
	// Availability is the GPU monitor's latest report.
	Availability() attest.Availability
	// Refresh asks for the offer to be published again, rate-limited: it
	// advertises what is booked.
	Refresh()
}

var _ Offers = (*offers.Publisher)(nil)

// Stream is what the provider needs of a job stream (/job/3): a libp2p
// stream is one; tests hand it an in-memory pipe.
type Stream interface {
	io.ReadWriteCloser
	Reset() error
	SetDeadline(time.Time) error
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// Config is what a Provider needs from its node.
type Config struct {
	// Offers is the node's offer publisher: the current offer, settings
	// and availability.
	Offers Offers
	// Network is the market's network name (the host's): awards for
	// another are refused.
	Network string
	// Store keeps the lease records.
	Store Store
	// Key signs bids and counter-signs leases; its peer ID is this
	// provider's.
	Key crypto.PrivKey
	// Exec runs the containers; nil: this node cannot run jobs and never bids.
	Exec executor.Executor
	// Data fetches and reads jobs' input DAGs and keeps their outputs;
	// nil: a job with inputs fails to start, and outputs are not kept.
	Data Data
	// OutputRetention is how long a job's outputs are kept for its renter
	// to fetch; 0 means DefaultOutputRetention.
	OutputRetention time.Duration
	// InputFetchTimeout bounds the fetch of a job's inputs; 0 means
	// DefaultInputFetchTimeout.
	InputFetchTimeout time.Duration
	// MaxJobInput bounds a job's inputs, in all, as written into its
	// volumes (every block counted as often as it is linked); 0 means
	// DefaultMaxJobInput.
	MaxJobInput int64
	// DiskReserve is what a job's inputs must leave free on the disks
	// they go to.
	DiskReserve int64
	// FreeDisk says how many bytes may still be written where a fetch
	// puts blocks (the block store) and where the input volumes go; nil:
	// the free disk is not checked.
	FreeDisk func(ctx context.Context) (store, volumes int64, err error)
	// GPUs is read for telemetry; nil when the node has no GPUs.
	GPUs attest.Source
	// Record appends to this node's ledger feed, logging rather than
	// failing when it cannot.
	Record func(typ string, payload []byte)
	// RecordAll is Record for several entries of one type in one write
	// (the awards of one group commit, awardbatch.go); nil: Record each.
	RecordAll func(typ string, payloads [][]byte)
	// Tag prefixes this node's executor job IDs (node's execTag), so that
	// nodes sharing one Docker engine never reconcile away each other's jobs.
	Tag string
	// StartDeadline: how long an award holds GPUs unstarted; 0 keeps the
	// scheduler's default.
	StartDeadline time.Duration
	// WrongAnswers: fault injection, a provider that lies about its output.
	WrongAnswers bool
	// Spawn runs the followers of the jobs Restore adopts, on goroutines
	// the node's Stop waits for (it settles them before the stores
	// close); nil: plain goroutines.
	Spawn func(func())
	// OnService, when set, hears that a service job's container serves
	// at addr for renter (once it runs, or is adopted after a restart);
	// OnServiceDrain that it is being stopped (preempted, unpaid, at its
	// lease's end) or has exited, so it takes no new streams while those
	// open finish; OnServiceEnd that it no longer serves at all. None may
	// block; OnServiceDrain may be nil.
	OnService      func(jobID string, renter peer.ID, addr netip.AddrPort)
	OnServiceDrain func(jobID string)
	OnServiceEnd   func(jobID string)
	// Gangs carries gang members' connections between providers
	// (node/gangnet); nil: a gang member runs without GLEANER_GANG_PEERS.
	Gangs GangNet
	Log   *slog.Logger
}

// activeLease is what the adapter holds for a lease the scheduler has:
// the wire bytes, the container, the streams following it, and the
// channels through which the scheduler's actions reach its run. It holds
// no lifecycle state: that is the scheduler's (see Provider.mu).
type activeLease struct {
	lease *auction.Lease
	raw   []byte
	hub   *eventHub // the streams following the job
	// job, meter and starting are guarded by Provider.mu.
	job   executor.Job // the container, once it runs as the lease's job
	meter *meter       // what the run has been paid; set with job
	// starting: the run is starting the job's container (launching.go),
	// the handle that calls the start off; nil before and after.
	starting *starting

	launch     chan struct{} // closed by the scheduler's Launch action
	launchOnce sync.Once
	// ctrl carries the scheduler's actions for a started lease to its run:
	// pause, resume and the endings. Buffered: do never blocks on a run.
	ctrl chan sched.Action
	done chan struct{} // closed when the lease is released
	// cancelled is closed when the renter cancels a job that has not
	// begun (a reservation waiting for its window): nothing to stop yet.
	cancelled  chan struct{}
	cancelOnce sync.Once
	// gang is the member's place in its gang's network, joined before its
	// container starts and left when its run ends (gang_start.go); nil for
	// any other job. Touched by the lease's run goroutine only.
	gang *gangnet.Membership
	// back is closed once its renter follows the job on a stream of its
	// own (attach): an adopted job's renter came back (see awaitRenter).
	back     chan struct{}
	backOnce sync.Once
	// outputMax is the spec's outputs.max_size, which keepOutputs holds
	// the outputs to; 0 for a job adopted after a restart (no spec here).
	// Set by launchJob before the job runs, read by the same run.
	outputMax int64
	// logRun names this process's copy of the job's output, which log
	// offsets count in (wire.Event.LogRun): a job adopted after a restart
	// is followed from the adoption on, its offsets from 0 again.
	logRun string
}

func newActiveLease(l *auction.Lease, raw []byte) *activeLease {
	return &activeLease{lease: l, raw: raw, hub: &eventHub{}, launch: make(chan struct{}),
		ctrl: make(chan sched.Action, 8), done: make(chan struct{}), cancelled: make(chan struct{}), back: make(chan struct{}),
		logRun: fmt.Sprintf("%016x", rand.Uint64())}
}

// New makes the provider's adapter; bg is the market's background context.
func New(bg context.Context, c Config) (*Provider, error) {
	var opts []sched.Option
	if c.StartDeadline > 0 {
		opts = append(opts, sched.WithStartDeadline(c.StartDeadline))
	}
	self, err := peer.IDFromPrivateKey(c.Key)
	if err != nil {
		return nil, fmt.Errorf("providing: the node's key: %w", err)
	}
	pj := &Provider{p: c.Offers, self: self.String(), network: c.Network, store: c.Store, key: c.Key, exec: c.Exec, gangs: c.Gangs, data: c.Data, retention: c.OutputRetention, inputTimeout: c.InputFetchTimeout,
		maxInput: c.MaxJobInput, reserve: max(c.DiskReserve, 0), freeDisk: c.FreeDisk, log: c.Log, bg: bg, tag: c.Tag,
		gpus: c.GPUs, wrongAnswers: c.WrongAnswers, spawn: c.Spawn, onService: c.OnService, onServiceEnd: c.OnServiceEnd,
		onServiceDrain: c.OnServiceDrain, sched: sched.New(opts...), leases: map[string]*activeLease{}, kick: make(chan struct{}, 1), begins: defaultBegin}
	pj.record = func(typ string, payload []byte) {
		if !pj.crashed() {
			c.Record(typ, payload)
		}
	}
	pj.recordAll = func(typ string, payloads [][]byte) {
		switch {
		case pj.crashed():
		case c.RecordAll != nil:
			c.RecordAll(typ, payloads)
		default:
			for _, p := range payloads {
				c.Record(typ, p)
			}
		}
	}
	if pj.spawn == nil {
		pj.spawn = func(f func()) { go f() }
	}
	if pj.retention <= 0 {
		pj.retention = DefaultOutputRetention
	}
	if pj.inputTimeout <= 0 {
		pj.inputTimeout = DefaultInputFetchTimeout
	}
	if pj.maxInput <= 0 {
		pj.maxInput = DefaultMaxJobInput
	}
	pj.sched.SetLaunchLead(defaultBegin)
	pj.loadEstablished()
	return pj, nil
}

// SimulateCrash is fault injection for tests: from now on the provider
// acts as one that was killed (kill -9) would have, whatever its node's
// Stop does next. It journals and records nothing more, and its runs
// return as they are: their containers run on, their leases stay
// launched and unsettled, for the next start to adopt (Restore).
func (pj *Provider) SimulateCrash() { pj.dead.Store(true) }

func (pj *Provider) crashed() bool { return pj.dead.Load() }

// HandleQuote serves /auction/1: a request for quotes gets a signed bid
// or a decline; a release (QuoteRequest.Release) gets the stream's close.
func (pj *Provider) HandleQuote(s network.Stream) {
	pj.serveQuote(s, s.Conn().RemotePeer().String())
}

// serveQuote is HandleQuote's work on a stream from the peer from, the
// renter its quote holds GPUs for and the only one that may release them.
func (pj *Provider) serveQuote(s Stream, from string) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	var req wire.QuoteRequest
	if err := wire.Read(s, wire.MaxRequestFrame, &req); err != nil {
		_ = s.Reset()
		return
	}
	if req.Release {
		pj.releaseHold(req, from) // answered by the close alone
		return
	}
	_ = wire.Write(s, pj.quote(req, from))
}

// releaseHold drops the hold of from's quote for the request's job and
// nonce; anyone else's release does nothing (auction/provider.Desk.Release).
func (pj *Provider) releaseHold(req wire.QuoteRequest, from string) bool {
	return pj.desk().Release(req.JobID, from, req.Nonce, time.Now())
}

// quote answers from's request for quotes; the GPUs its bid names are held
// for from's award of this job (auction/provider's quote holds).
func (pj *Provider) quote(req wire.QuoteRequest, from string) wire.QuoteReply {
	if pj.exec == nil {
		return wire.QuoteReply{Decline: "this provider has no container runtime"}
	}
	if pj.stopping.Load() {
		return wire.QuoteReply{Decline: errStopping.Error()}
	}
	raw, decline := pj.desk().Quote(req.Spec, req.JobID, from, req.Nonce, pj.p.Current(), time.Now())
	return wire.QuoteReply{Bid: raw, Decline: decline}
}

// desk is the scheduler's answer to quotes and awards (auction/provider),
// the same code the market simulator runs.
func (pj *Provider) desk() *sched.Desk {
	return &sched.Desk{Engine: &pj.engine, Sched: pj.sched, Key: pj.key, Self: pj.self, Network: pj.network}
}

// HandleAward serves /lease/1: an award gets the co-signed lease or a
// refusal.
func (pj *Provider) HandleAward(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	var req wire.AwardRequest
	if err := wire.Read(s, wire.MaxRequestFrame, &req); err != nil {
		_ = s.Reset()
		return
	}
	raw, err := pj.accept(req.Lease, s.Conn().RemotePeer().String())
	if err != nil {
		_ = wire.Write(s, wire.AwardReply{Refused: err.Error()})
		return
	}
	_ = wire.Write(s, wire.AwardReply{Lease: raw})
}

// accept checks an award against the provider's own bid, has the
// scheduler claim its GPUs and counter-signs. The lease is durable and
// journaled before the renter hears of it: concurrent awards are claimed
// one at a time and made durable together (awardbatch.go).
func (pj *Provider) accept(proposal []byte, from string) ([]byte, error) {
	if pj.stopping.Load() {
		return nil, errStopping
	}
	aw, err := pj.desk().CheckAward(proposal, from, time.Now())
	if err != nil {
		return nil, err
	}
	pj.awaitGrace(aw.Lease, aw.GPUs) // a newcomer's award in a newcomer's grace: wait it out
	return pj.commitAward(&pendingAward{l: aw.Lease, sl: aw.Signed, want: aw.GPUs})
}

// claim is one award's turn in its group (commitGroup): the same award again gets
// its lease (ok false: nothing to write); otherwise it supersedes the
// renter's unstarted award of the job, displaces newcomers' awards in
// the way and claims the GPUs. flush makes the awards claimed so far in
// this batch durable: claim calls it before any step that could end or
// return one of them.
func (pj *Provider) claim(p *pendingAward, flush func()) (ok bool) {
	l, sl, want := p.l, p.sl, p.want
	if pj.lookup(l.JobID) != nil {
		flush() // it may be this batch's, not recorded yet
	}
	// The same award again (a renter whose reply was lost) gets the same
	// lease; any other award for this job is refused by the claim.
	if al := pj.lookup(l.JobID); al != nil {
		if _, held, err := auction.ReadLease(al.raw); err == nil && bytes.Equal(held.Body, sl.Body) {
			p.raw = al.raw
			return false
		}
		if !pj.supersede(al, l) {
			p.err = errors.New("a lease for this job exists already")
			return false
		}
	}
	if p.err = sl.CounterSign(pj.key); p.err != nil {
		return false
	}
	raw, err := sl.Marshal()
	if err != nil {
		p.err = err
		return false
	}
	// Newcomers' unstarted awards in the way, past their grace (or any,
	// for a renter that has paid us), are settled and freed first: after
	// this batch's claims are recorded, since one of them may be in the
	// way.
	now := time.Now()
	if pj.sched.Displaces(l, want, now) {
		flush()
		now = time.Now()
	}
	pj.displace(l, want, now)
	victims, err := pj.sched.Claim(l, want, time.Now())
	if errors.Is(err, sched.ErrRaced) {
		p.err = errors.New(auction.RefusedRaced)
		return false
	}
	if err != nil {
		p.err = err
		return false
	}
	pj.mu.Lock()
	pj.leases[l.JobID] = newActiveLease(l, raw)
	pj.mu.Unlock()
	p.raw, p.victims = raw, victims
	return true
}

// lookup is the adapter's record of a lease, nil if none.
func (pj *Provider) lookup(jobID string) *activeLease {
	pj.mu.Lock()
	defer pj.mu.Unlock()
	return pj.leases[jobID]
}

// forget drops a lease whose claim could not be recorded.
func (pj *Provider) forget(jobID string) {
	pj.do(pj.sched.Release(jobID, time.Now()))
	pj.mu.Lock()
	delete(pj.leases, jobID)
	pj.mu.Unlock()
}

// release frees a settled lease's GPUs: the scheduler's part, then the
// adapter's, and launches whatever waited for those GPUs.
func (pj *Provider) release(jobID string) {
	pj.freed(pj.lookup(jobID), pj.sched.Release(jobID, time.Now()))
}

// freed is the adapter's part of releasing al, once the scheduler has
// freed its GPUs: it drops al (unless another lease of its job holds it
// now) and carries out acts, the launches of what waited for those GPUs.
func (pj *Provider) freed(al *activeLease, acts []sched.Action) {
	if al != nil {
		pj.mu.Lock()
		if pj.leases[al.lease.JobID] == al {
			delete(pj.leases, al.lease.JobID)
			close(al.done)
		}
		pj.mu.Unlock()
	}
	pj.do(acts)
	pj.poke()
	pj.p.Refresh()
}

// gpusOf is the GPU indexes the scheduler holds for a lease: a copy.
func (pj *Provider) gpusOf(jobID string) []int {
	if info, ok := pj.sched.Lease(jobID, time.Now()); ok {
		return info.GPUs
	}
	return nil
}

// DealsWith: author rents from this provider now.
func (pj *Provider) DealsWith(author string) bool { return pj.sched.DealsWith(author) }

// Holds: this provider holds a lease for jobID now (its GPUs are
// claimed), as the scheduler, the owner of that, says.
func (pj *Provider) Holds(jobID string) bool {
	_, ok := pj.sched.Lease(jobID, time.Now())
	return ok
}

// SetAvailability hands the scheduler the inventory as it is now; an
// owner reclaiming a GPU preempts the bronze leases on it, and a job
// whose process runs on a GPU it did not lease is stopped.
func (pj *Provider) SetAvailability(a attest.Availability) {
	for _, e := range a.Escaped {
		// Its container's device restriction failed: the runtime, not
		// the renter alone, is at fault, and the owner must know.
		pj.log.Error("A JOB ESCAPED ITS GPUs: its process computes on a GPU its lease did not give it; stopping the job",
			"job", e.Job, "pid", e.PID, "gpu", e.GPU, "uuid", e.GPUUUID)
	}
	pj.do(pj.sched.SetAvailability(a, time.Now()))
}

// supersede ends an award its renter never started when the same renter
// asks for another lease for the same job: its reply was lost (a renter
// under load gives up on an award after its deadline and auctions the job
// again), so it will never start the first one. Left held, it would hold
// the GPUs until its start deadline and refuse the renter's new award,
// ending the job no-match in a full market. It is settled (nothing was
// run, nothing is charged) and freed before the new lease is claimed, in
// that feed order, so that no node reads the GPU as leased twice.
func (pj *Provider) supersede(al *activeLease, l *auction.Lease) bool {
	if al.lease.Renter != l.Renter {
		return false
	}
	// The scheduler decides, in one step, that the award is superseded
	// and not started: from here no start of it succeeds (checkStart), so
	// its end is recorded and settled outside every lock.
	if !pj.sched.BeginSupersede(al.lease) {
		return false // started: the renter has it
	}
	if err := pj.saveLease(l.JobID, al.raw, LeaseExpired); err != nil {
		pj.log.Warn("lease state not saved", "job", l.JobID, "err", err)
		pj.sched.CancelSupersede(al.lease)
		return false
	}
	pj.settle(al, nil, false)
	acts, ok := pj.sched.Supersede(l.JobID, time.Now())
	if !ok {
		return false // expired meanwhile: the tick settles and frees it
	}
	pj.freed(al, acts)
	pj.log.Info("award superseded by the same renter's new award: it was never started", "job", l.JobID, "renter", l.Renter)
	return true
}
