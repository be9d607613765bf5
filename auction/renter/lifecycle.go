package renter

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// End is how one leased run of a job ended, as the renter saw it. The
// transport (node's job stream, the simulator's in-memory provider) maps
// what the provider said to one of these by its typed code, never by its
// words. Its numbers are kept in the renter's store (Snapshot): they
// never change, and a new end takes a new number.
type End uint8

const (
	// EndCompleted: the job exited 0 (and passed any verification).
	EndCompleted End = iota + 1
	// EndFailed: the job failed for good: an exit code the spec does not
	// retry, a provider that stopped it unpaid, an error after it began,
	// a wrong answer.
	EndFailed
	// EndCancelled: its renter cancelled it.
	EndCancelled
	// EndRetryExit: it exited with a code the spec's retry.on_exit_codes
	// names.
	EndRetryExit
	// EndPreempted: a better tier or the GPU's owner took the GPUs back,
	// with notice; a checkpoint may have travelled back.
	EndPreempted
	// EndLost: the provider could not be reached, past the renter's
	// bound for coming back to it.
	EndLost
	// EndNotStarted: the provider co-signed the lease but the job never
	// ran; nothing is charged. Cause says why.
	EndNotStarted
)

// StartCause is why a leased job never started (EndNotStarted). Its
// numbers are kept in the renter's store (Snapshot) and never change.
type StartCause uint8

const (
	// StartOther: the provider could not start it (a container that
	// would not start, a reservation that failed at its window).
	StartOther StartCause = iota
	// StartPull: the provider could not pull the job's image.
	StartPull
	// StartInputs: the provider could not fetch the job's inputs.
	StartInputs
	// StartDisplaced: the renter was slow to start its award and the
	// provider gave the GPUs to another (auction/provider's newcomer
	// rule): neither side failed.
	StartDisplaced
	// StartTakenBack: a claim of a better tier took the award's GPUs
	// before it started: a bronze award is the provider's to take back.
	StartTakenBack
)

// RunEnd is one leased run's end.
type RunEnd struct {
	End      End
	Cause    StartCause // for EndNotStarted
	Provider string
	// Why is the end in words, for the job's record and its explain.
	Why string
	// Checkpoint is what a preempted run shipped back; nil keeps the
	// last one.
	Checkpoint []byte
}

// Outcome is a job's typed end.
type Outcome uint8

const (
	OutcomeCompleted Outcome = iota + 1
	OutcomeFailed
	OutcomeNoMatch
	OutcomeCancelled
)

func (o Outcome) String() string {
	switch o {
	case OutcomeCompleted:
		return "completed"
	case OutcomeFailed:
		return "failed"
	case OutcomeNoMatch:
		return "no-match"
	case OutcomeCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Step is the lifecycle's decision after a run or a placement: the job
// ends (Done, with its Outcome), or it is auctioned again (Policy says
// how), Why being the record's note either way.
type Step struct {
	Done    bool
	Outcome Outcome
	Why     string
}

// Bounds on runs that spend no re-auction. A run the provider could not
// start spends none, up to MaxNotStarted providers, or PullFailLimit when
// they could not pull the image or fetch the inputs: then the spec is to
// blame, not they. A preemption is the market working as designed, not a
// failure: it spends none, up to MaxPreemptions, and the job waits up to
// PreemptedPatience for a GPU to come free, the preempting provider's
// included.
const (
	PullFailLimit     = 2
	MaxNotStarted     = 3
	MaxPreemptions    = 50
	PreemptedPatience = 30 * time.Minute
)

// Lifecycle is the renter's policy for one job across its leases: which
// providers it leaves, which runs spend a re-auction, the checkpoint it
// resumes from, how patient its next placement is, and when it ends and
// how. It does no I/O and reads no clock: node's renter and the market
// simulator feed it the same typed events and act on its Steps.
type Lifecycle struct {
	image         string
	maxReauctions int
	pin           string
	// replica: a service's replica, whose preemption ends it: its service
	// places a successor (which may be of the floor's tier) while the
	// other replicas serve.
	replica bool

	exclude     map[string]bool
	left        map[string]string // provider the job left (excluded or not) -> why
	preemptors  map[string]bool   // providers that preempted the job, or to avoid: asked last
	checkpoint  []byte
	spent       int // re-auctions spent (Policy.Attempt)
	leases      int
	notStarted  int
	pulls       int
	inputs      int
	preemptions int
	last        RunEnd // the last run's end; End 0 before the first
}

// NewLifecycle is the lifecycle of a job with spec, pinned to provider
// pin ("" for none).
func NewLifecycle(spec *auction.JobSpec, pin string) *Lifecycle {
	return &Lifecycle{image: spec.Image, maxReauctions: spec.Retry.MaxReauctions, pin: pin, replica: spec.IsService(),
		exclude: map[string]bool{}, left: map[string]string{}, preemptors: map[string]bool{}}
}

// SetMaxReauctions overrides the spec's retry.max_reauctions: the
// simulator's renters ask for as many as their patience allows.
func (l *Lifecycle) SetMaxReauctions(n int) { l.maxReauctions = n }

// Avoid makes provider a last resort for the job's auctions from the
// start, for why: a service replica's successor avoids the provider lost
// with its predecessor, yet may go back to it (restarted, say) when no
// other provider bids.
func (l *Lifecycle) Avoid(provider, why string) {
	l.preemptors[provider], l.left[provider] = true, why
}

// Exclude is the set of providers the job's auctions leave out; the
// Request passed to Place holds it, and it grows as runs end.
func (l *Lifecycle) Exclude() map[string]bool { return l.exclude }

// LastResort is the set of providers that preempted the job (or that it
// was told to Avoid): its auctions may award them, but only after every
// other bidder (the Request passed to Place holds it, and it grows as runs
// end).
func (l *Lifecycle) LastResort() map[string]bool { return l.preemptors }

// Left is why the job left each provider it left, excluded (Exclude) or
// not (a preemption, an award taken back or displaced), for its explain.
func (l *Lifecycle) Left() map[string]string { return l.left }

// After is the end of the job's last run, for the notes of the auctions
// that follow it; "" before the first run ends.
func (l *Lifecycle) After() string {
	if l.last.End == 0 {
		return ""
	}
	return l.last.Why
}

// Checkpoint is the latest checkpoint a preempted run shipped back, for
// the next start to resume from.
func (l *Lifecycle) Checkpoint() []byte { return l.checkpoint }

// Leases is how many leases the job has taken.
func (l *Lifecycle) Leases() int { return l.leases }

// Policy is the next placement's: the re-auctions spent so far, and the
// patience of a job sent back to auction (none for a new job, whose book
// is as current as it gets). After a failed pull it is impatient and
// spends nothing: another provider that matches now is tried at once,
// and none means the image is to blame (Unplaced). The caller sets
// Progress, Rand and the backoff.
func (l *Lifecycle) Policy() Policy {
	p := Policy{MaxReauctions: l.maxReauctions, Attempt: l.spent}
	switch {
	case l.last.End == 0:
	case l.last.End == EndNotStarted && l.last.Cause == StartPull:
		p.MaxReauctions = l.spent
	case l.last.End == EndPreempted:
		p.Patience = PreemptedPatience
	case l.pin == "" || !l.exclude[l.pin]:
		p.Patience = DefaultPatience
	}
	return p
}

// Placed records a lease made by Place.
func (l *Lifecycle) Placed(res Result) {
	l.spent = res.Attempt
	l.leases++
}

// Unplaced is the end of a job Place could not lease, err being Place's.
func (l *Lifecycle) Unplaced(res Result, err error) Step {
	l.spent = res.Attempt
	if !errors.Is(err, ErrNoMatch) {
		return Step{Done: true, Outcome: OutcomeFailed, Why: err.Error()}
	}
	switch {
	case l.last.End == EndNotStarted && l.last.Cause == StartPull:
		return Step{Done: true, Outcome: OutcomeFailed, Why: fmt.Sprintf(
			"%s could not pull the image %q (the last said: %s), and no other provider matched (%v): check that the reference exists and, for a private registry, that the spec's registry_auth_file holds credentials it accepts; nothing was charged",
			providers(l.pulls), l.image, strings.TrimPrefix(l.last.Why, "provider: "), err)}
	case l.last.End == EndPreempted:
		return Step{Done: true, Outcome: OutcomeNoMatch, Why: fmt.Sprintf("%v (preempted %d times; no GPU came free within %s of the last: %s)",
			err, l.preemptions, PreemptedPatience, l.last.Why)}
	case l.last.End != 0:
		return Step{Done: true, Outcome: OutcomeNoMatch, Why: fmt.Sprintf("%v (auctioned again after: %s)", err, l.last.Why)}
	}
	return Step{Done: true, Outcome: OutcomeNoMatch, Why: err.Error()}
}

// Ended decides what follows a run's end: the job's outcome, or another
// auction. A provider that failed the job (lost it, could not start it,
// or ran it to a retryable exit) is left out of its later auctions; one
// that preempted it or took back an award is not, since that is the
// market working as designed, and a job the renter itself was too slow to
// start (displaced) blames nobody.
func (l *Lifecycle) Ended(e RunEnd) Step {
	switch e.End {
	case EndCompleted:
		return Step{Done: true, Outcome: OutcomeCompleted, Why: e.Why} // a note, such as outputs not kept
	case EndCancelled:
		return Step{Done: true, Outcome: OutcomeCancelled, Why: e.Why}
	case EndFailed:
		return Step{Done: true, Outcome: OutcomeFailed, Why: e.Why}
	}
	l.last = e
	if len(e.Checkpoint) > 0 {
		l.checkpoint = e.Checkpoint
	}
	switch e.End {
	case EndNotStarted:
		if e.Cause == StartDisplaced || e.Cause == StartTakenBack {
			// Nobody failed: bounded as preemptions are.
			l.note(e.Provider, e.Why)
			l.preemptions++
			if l.preemptions > MaxPreemptions {
				return Step{Done: true, Outcome: OutcomeFailed, Why: fmt.Sprintf("%s (taken back or preempted %d times: given up)", e.Why, l.preemptions)}
			}
			return Step{Why: e.Why + "; nothing was charged; auctioning again (no re-auction spent)"}
		}
		l.notStarted++
		switch e.Cause {
		case StartPull:
			l.pulls++
		case StartInputs:
			l.inputs++
		}
		l.leave(e.Provider, e.Why)
		if msg := l.notStartedLimit(e.Why); msg != "" {
			return Step{Done: true, Outcome: OutcomeFailed, Why: msg}
		}
		return Step{Why: e.Why + "; nothing was charged; auctioning again without that provider (no re-auction spent)"}
	case EndPreempted:
		if l.replica {
			return Step{Done: true, Outcome: OutcomeFailed, Why: e.Why + " (a service replica: its service places a successor)"}
		}
		l.preemptions++
		if e.Provider != "" {
			l.preemptors[e.Provider] = true
			l.note(e.Provider, e.Why)
		}
		if l.preemptions > MaxPreemptions {
			return Step{Done: true, Outcome: OutcomeFailed, Why: fmt.Sprintf("%s (preempted %d times: given up)", e.Why, l.preemptions)}
		}
		from := "from the start (no checkpoint came back)"
		if len(l.checkpoint) > 0 {
			from = "from its checkpoint"
		}
		return Step{Why: fmt.Sprintf("%s; auctioning again %s, waiting up to %s for a free GPU (a preemption spends no re-auction)", e.Why, from, PreemptedPatience)}
	}
	// EndLost, EndRetryExit: the provider's part, or the job's; a
	// re-auction is spent.
	l.leave(e.Provider, e.Why)
	if l.spent >= l.maxReauctions {
		return Step{Done: true, Outcome: OutcomeFailed, Why: e.Why + fmt.Sprintf(" (no re-auctions left of %d)", l.maxReauctions)}
	}
	l.spent++
	return Step{Why: e.Why + "; auctioning again"}
}

func (l *Lifecycle) leave(provider, why string) {
	if provider != "" {
		l.exclude[provider], l.left[provider] = true, why
	}
}

// note records why the job left provider without excluding it.
func (l *Lifecycle) note(provider, why string) {
	if provider != "" && !l.exclude[provider] {
		l.left[provider] = why
	}
}

// notStartedLimit is the job's failure once its providers could not start
// it too often; "" while it may be auctioned again.
func (l *Lifecycle) notStartedLimit(last string) string {
	last = strings.TrimPrefix(last, "provider: ")
	switch {
	case l.inputs >= PullFailLimit && strings.Contains(last, ": refused: "):
		// The provider fetched enough to measure them (issue 34).
		return fmt.Sprintf("%s refused the job's inputs (the last said: %s): they are larger, deeper or wider than those providers take for one job, or have disk for; use smaller inputs, or providers that hold them already (market offers 'dataset=CID'); nothing was charged",
			providers(l.inputs), last)
	case l.inputs >= PullFailLimit:
		return fmt.Sprintf("%s could not fetch the job's inputs (the last said: %s): check that a node holding each input is online and connected (gleaner data ls there, gleaner data pin here); nothing was charged",
			providers(l.inputs), last)
	case l.pulls >= PullFailLimit:
		return fmt.Sprintf("%s could not pull the image %q (the last said: %s): check that the reference exists and, for a private registry, that the spec's registry_auth_file holds credentials it accepts; nothing was charged",
			providers(l.pulls), l.image, last)
	case l.notStarted >= MaxNotStarted:
		return fmt.Sprintf("%s could not start the job (the last said: %s); nothing was charged", providers(l.notStarted), last)
	}
	return ""
}

func providers(n int) string {
	if n == 1 {
		return "1 provider"
	}
	return fmt.Sprintf("%d providers", n)
}

// Snapshot is what a Lifecycle has learnt of its job's runs, as the
// renter's store keeps it: a renter that restarts while the job waits in
// its re-auction rebuilds the lifecycle from it (Restore) and goes on
// where it left off, spending no re-auction twice and asking the providers
// it left last or not at all. The checkpoint to resume from is kept apart
// (it may be megabytes) and passed to Restore. End and StartCause are
// stored as their numbers, which therefore never change.
type Snapshot struct {
	Exclude     []string          `json:"exclude,omitempty"`
	LastResort  []string          `json:"last_resort,omitempty"`
	Left        map[string]string `json:"left,omitempty"`
	Spent       int               `json:"spent,omitempty"`
	Leases      int               `json:"leases,omitempty"`
	NotStarted  int               `json:"not_started,omitempty"`
	Pulls       int               `json:"pulls,omitempty"`
	Inputs      int               `json:"inputs,omitempty"`
	Preemptions int               `json:"preemptions,omitempty"`
	// The last run's end, less its checkpoint.
	LastEnd      End        `json:"last_end,omitempty"`
	LastCause    StartCause `json:"last_cause,omitempty"`
	LastProvider string     `json:"last_provider,omitempty"`
	LastWhy      string     `json:"last_why,omitempty"`
}

// Snapshot is l's state for the renter's store, sorted so that the same
// state always reads the same.
func (l *Lifecycle) Snapshot() Snapshot {
	s := Snapshot{Exclude: sortedKeys(l.exclude), LastResort: sortedKeys(l.preemptors), Left: maps.Clone(l.left),
		Spent: l.spent, Leases: l.leases, NotStarted: l.notStarted, Pulls: l.pulls, Inputs: l.inputs, Preemptions: l.preemptions,
		LastEnd: l.last.End, LastCause: l.last.Cause, LastProvider: l.last.Provider, LastWhy: l.last.Why}
	if len(s.Left) == 0 {
		s.Left = nil
	}
	return s
}

// Restore is the lifecycle of a job with spec, pinned to pin, that had
// learnt s and resumes from checkpoint (nil for none): what NewLifecycle
// and the same runs' ends would have built.
func Restore(spec *auction.JobSpec, pin string, s Snapshot, checkpoint []byte) *Lifecycle {
	l := NewLifecycle(spec, pin)
	for _, p := range s.Exclude {
		l.exclude[p] = true
	}
	for _, p := range s.LastResort {
		l.preemptors[p] = true
	}
	maps.Copy(l.left, s.Left)
	l.spent, l.leases, l.notStarted, l.pulls, l.inputs, l.preemptions = s.Spent, s.Leases, s.NotStarted, s.Pulls, s.Inputs, s.Preemptions
	l.last = RunEnd{End: s.LastEnd, Cause: s.LastCause, Provider: s.LastProvider, Why: s.LastWhy}
	l.checkpoint = checkpoint
	return l
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}
