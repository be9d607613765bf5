package provider

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
)

// State is a lease's lifecycle state. The scheduler is its one owner: a
// provider's adapter keeps no copy of it, reads it in snapshots (Lease,
// Leases) and persists records derived from it (node/providing's
// RecordState). Every change is one the caller can write before it acts
// on it; writing a state twice is harmless.
type State string

// Lease states.
const (
	Awarded State = "awarded" // claimed and co-signed, GPUs held, not started
	Started State = "started" // the renter started it; it cannot start again
	Ended   State = "ended"   // settled and released
	Expired State = "expired" // never started within the start deadline
)

// DefaultStartDeadline is how long an award holds its GPUs before its
// renter must start it. A renter starts at once after the award; a lease
// that is never started would otherwise hold the GPUs for free.
const DefaultStartDeadline = 30 * time.Second

// DefaultRetention is how long the scheduler remembers the job ID of a
// released lease, so that an award repeated for it is refused as a
// duplicate. It outlasts the validity of any bid (two minutes by default),
// after which an award of the old bid is refused anyway.
const DefaultRetention = time.Hour

// maxIndex bounds the GPU indexes an inventory may name, so a corrupt
// snapshot cannot make the scheduler allocate without limit.
const maxIndex = 255

// Errors. Each answers one question a caller acts on: ErrRaced and
// ErrBusy ask the renter to auction again, the rest refuse for good.
var (
	ErrRaced      = errors.New(auction.RefusedRaced)
	ErrBusy       = errors.New(auction.ReasonBusy)
	ErrDuplicate  = errors.New("a lease for this job exists already")
	ErrWithdrawn  = errors.New("the owner withdrew the GPU")
	ErrUnknownGPU = errors.New("no such GPU in this machine")
	ErrInvalid    = errors.New("invalid request to the scheduler")
	ErrNoLease    = errors.New("no active lease for this job")
	ErrStarted    = errors.New("this lease has started already; attach to follow its job")
	ErrExpired    = errors.New("the award expired: it was not started in time")
	ErrEnded      = errors.New("the lease has ended")
	ErrEnding     = errors.New("the lease is being stopped")
	ErrNotLaunch  = errors.New("the lease's job may not run yet")
	ErrSuperseded = errors.New("no active lease for this job: this lease was superseded by another")
)

// Option configures a Scheduler.
type Option func(*Scheduler)

// WithStartDeadline sets how long an award waits to be started; <= 0
// keeps DefaultStartDeadline.
func WithStartDeadline(d time.Duration) Option { return func(s *Scheduler) { s.startDeadline = d } }

// WithRetention sets how long released job IDs are remembered; <= 0 keeps
// DefaultRetention.
func WithRetention(d time.Duration) Option { return func(s *Scheduler) { s.retention = d } }

// Scheduler owns one provider's inventory, commitments, leases and quote
// history. Its methods are safe for concurrent use; none blocks on
// anything but its mutex.
type Scheduler struct {
	startDeadline time.Duration // fixed by New
	retention     time.Duration // fixed by New
	holdFor       time.Duration // a quote hold's lifetime; fixed by New

	mu sync.Mutex // guards every field below and the leases and GPUs they reach
	// grace protects a newcomer's unstarted award from other newcomers'
	// (see newcomer.go); < 0: the rule is off.
	grace time.Duration
	// est are the established renters, each with the estSeq of its last
	// payment, bounded by MaxEstablished.
	est    map[string]uint64
	estSeq uint64
	// gpus by index; an index the inventory never named is not known.
	gpus []gpu
	// windows is the owner's availability (merged, sorted); bounded is
	// false until SetWindows, and the owner's time is then unbounded.
	windows []auction.Window
	bounded bool
	// notice is the owner's preemption notice, which Plan and CanPromise
	// assume a bronze lease gets (a claim uses its lease's own).
	notice time.Duration
	// lead is how much before its start a reservation launches (see
	// SetLaunchLead).
	lead   time.Duration
	leases map[string]*lease // active leases by job ID
	active []*lease          // the same, in claim order, so output is deterministic
	ended  map[string]State  // released job IDs, Ended or Expired, for retention
	// endedRun is the run identities (runKey) of each ended job's leases,
	// the latest maxEndedRuns: a claim of one of them again is refused,
	// a new lease of the job
	// (its renter auctioned it again, as after a preemption) is not.
	endedRun map[string][]string
	endedQ   []endedAt // ended in release order, to forget them
	seq      uint64    // orders claims and quotes
	scratch  []int     // Plan's, reused
	// holds are the live quote holds (hold.go), perRenter their count
	// by renter, both bounded by the caps.
	holds     map[holdKey]*hold
	perRenter map[string]int
	// due is the earliest next of the active leases (zero: none), unless
	// stale, when it is recomputed before use.
	due   time.Time
	stale bool
}

type gpu struct {
	known    bool // an inventory named this index
	uuid     string
	hash     string // attest.UUIDHash(uuid)
	out      string // why the owner withdrew it; "" while it may be sold
	quoted   uint64 // seq when a plan last named it; 0: never
	commits  []commit
	draining []*lease // preempted leases still on it until they release
}

type endedAt struct {
	job string
	at  time.Time
}

// New returns a scheduler with no GPUs; give it an inventory with
// SetAvailability. Options apply first, defaults last.
func New(opts ...Option) *Scheduler {
	s := &Scheduler{leases: map[string]*lease{}, ended: map[string]State{}, endedRun: map[string][]string{}, est: map[string]uint64{},
		holds: map[holdKey]*hold{}, perRenter: map[string]int{}}
	for _, o := range opts {
		o(s)
	}
	if s.grace == 0 {
		s.grace = DefaultNewcomerGrace
	}
	if s.startDeadline <= 0 {
		s.startDeadline = DefaultStartDeadline
	}
	if s.retention <= 0 {
		s.retention = DefaultRetention
	}
	if s.holdFor <= 0 {
		s.holdFor = DefaultQuoteHold
	}
	return s
}

// SetAvailability replaces the inventory snapshot and which GPUs may be
// sold. A GPU is sellable when a.Available lists it and the inventory
// names it; GPUs an earlier snapshot named keep their identity (and their
// leases) when this one omits them, withdrawn. It returns the leases to
// preempt: bronze ones on a GPU the owner took back (silver and gold run
// out their lease on it), and every one on a GPU over the owner's hard
// limits or faulty (a.Stop), whatever its tier, with its notice; a job
// that escaped its GPUs (a.Escaped) stops at once, with no notice.
func (s *Scheduler) SetAvailability(a attest.Availability, now time.Time) []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range a.Inventory.GPUs {
		if g.Index < 0 || g.Index > maxIndex {
			continue
		}
		for len(s.gpus) <= g.Index {
			s.gpus = append(s.gpus, gpu{})
		}
		if gp := &s.gpus[g.Index]; !gp.known || gp.uuid != g.UUID {
			gp.known, gp.uuid, gp.hash = true, g.UUID, attest.UUIDHash(g.UUID)
		}
	}
	for i := range s.gpus {
		g := &s.gpus[i]
		switch why, listed := a.Withdrawn[i]; {
		case a.Err == "" && g.known && slices.Contains(a.Available, i) && !listed:
			g.out = ""
		case listed && why != "":
			g.out = why
		case a.Err != "":
			g.out = "the GPU inventory could not be read: " + a.Err
		default:
			g.out = "not offered"
		}
	}
	escaped := map[string]string{} // job -> where it escaped
	for _, e := range a.Escaped {
		if _, dup := escaped[e.Job]; !dup {
			escaped[e.Job] = fmt.Sprintf("pid %d on GPU %d (%s)", e.PID, e.GPU, e.GPUUUID)
		}
	}
	var out []Action
	for _, l := range s.active {
		if l.ending != 0 {
			continue
		}
		if where, ok := escaped[l.l.JobID]; ok {
			// Whatever its tier, and at once: it uses a GPU that is not
			// its own, and a notice would let it go on using it. (A
			// faulty GPU's job below keeps its notice to checkpoint.)
			a := l.end(Preempt, ReasonEscaped, where)
			a.Notice = 0
			out = append(out, a)
			s.refresh(l)
			continue
		}
		for _, i := range l.gpus {
			if why, hard := a.Stop[i]; hard {
				// Over the owner's hard limit, or faulty, every tier
				// stops, with its notice: the owner's hardware comes
				// before any lease.
				reason := ReasonHardLimit
				if _, fault := a.Faults[i]; fault {
					reason = ReasonGPUFault
				}
				out = append(out, l.end(Preempt, reason, why))
				s.refresh(l)
				break
			}
			if why := s.gpus[i].out; why != "" && l.l.Tier == auction.Bronze {
				out = append(out, l.end(Preempt, ReasonReclaimed, why))
				s.refresh(l)
				break
			}
		}
	}
	return out
}

// SetWindows sets the owner's availability windows (the offer's, unix
// seconds). A bronze lease that outlasts the window it runs in is preempted
// with its notice before the window closes. Until the first call the
// owner's time is unbounded; an empty list means no time at all.
func (s *Scheduler) SetWindows(ws []auction.Window, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windows, s.bounded = mergeWindows(ws), true
	for _, l := range s.active {
		s.arm(l, now)
		s.refresh(l)
	}
}

// SetNotice sets the preemption notice the owner's bids state (the
// offer's policy), which decides whether a gap before a reservation is
// long enough to sell to bronze (see MinBackfill).
func (s *Scheduler) SetNotice(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notice = max(d, 0)
}

// MaxLaunchLead bounds SetLaunchLead: a reservation's job never runs
// more than this before its window.
const MaxLaunchLead = 5 * time.Second

// SetLaunchLead sets how long before its start a reservation launches:
// the time its caller takes to get a job running (a container's start),
// so that the job runs at its start. Clamped to [0, MaxLaunchLead]; the
// lease is billed from its start all the same.
func (s *Scheduler) SetLaunchLead(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d = min(max(d, 0), MaxLaunchLead); d == s.lead {
		return
	}
	s.lead = d
	for _, l := range s.active {
		s.refresh(l)
	}
}

// windowEnd is when the owner's availability around now closes; now if
// now lies in none. Exact to the nanosecond (auction.AvailableFor rounds
// now down to its second), so that it agrees with itself as now advances.
func (s *Scheduler) windowEnd(now time.Time) time.Time {
	// Window bounds are whole seconds, so comparing seconds is exact:
	// now is before End exactly when now.Unix() < End.
	sec := now.Unix()
	i, _ := slices.BinarySearchFunc(s.windows, sec, func(w auction.Window, t int64) int {
		if w.End > t {
			return 1
		}
		return -1
	})
	if i == len(s.windows) || sec < s.windows[i].Start {
		return now
	}
	return time.Unix(s.windows[i].End, 0)
}

// mergeWindows sorts a copy of ws and unites overlapping or touching
// windows, so that the availability around an instant is one window.
func mergeWindows(ws []auction.Window) []auction.Window {
	out := slices.Clone(ws)
	slices.SortFunc(out, func(a, b auction.Window) int { return cmp.Compare(a.Start, b.Start) })
	merged := out[:0]
	for _, w := range out {
		if w.End <= w.Start {
			continue
		}
		if n := len(merged); n > 0 && w.Start <= merged[n-1].End {
			merged[n-1].End = max(merged[n-1].End, w.End)
			continue
		}
		merged = append(merged, w)
	}
	return merged
}

// Hashes names GPUs by index as bids, leases and telemetry do.
func (s *Scheduler) Hashes(idx []int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		if !s.knows(i) {
			return nil, ErrUnknownGPU
		}
		out = append(out, s.gpus[i].hash)
	}
	return out, nil
}

// Indexes is Hashes' inverse: the GPUs an award's hashes name.
func (s *Scheduler) Indexes(hashes []string) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(hashes))
	for _, h := range hashes {
		i := slices.IndexFunc(s.gpus, func(g gpu) bool { return g.known && g.hash == h })
		if i < 0 {
			return nil, ErrUnknownGPU
		}
		out = append(out, i)
	}
	return out, nil
}

func (s *Scheduler) knows(i int) bool { return i >= 0 && i < len(s.gpus) && s.gpus[i].known }

// Utilisation is the fraction of the sellable GPUs committed at now, as a
// job of tier t sees it: for silver and gold, GPUs held by bronze leases
// count as free, since bronze yields to them. No sellable GPU: 1, nothing
// can be sold. Unlike the old count in node, a GPU the owner withdrew is
// neither sold nor counted.
func (s *Scheduler) Utilisation(t auction.Tier, now time.Time) float64 {
	return s.LoadAt(t, now, now)
}

// DealsWith reports whether renter holds a lease here now.
func (s *Scheduler) DealsWith(renter string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.active {
		if l.l.Renter == renter {
			return true
		}
	}
	return false
}
