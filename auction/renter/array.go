package renter

import (
	"fmt"
	"sort"
)

// Array decides a job array's next steps: which shards to submit, when
// the array has failed or completed. Like Lifecycle it does no I/O and
// reads no clock: the node observes the shards' jobs, calls Step with
// what it saw, carries out the actions and keeps Snapshot durably, so a
// restarted node resumes the array where it was (node/renting/array.go).
//
// Each shard is a job of its own, with its own auction, lease and
// re-auctions (Lifecycle); Array only sees a shard's job end. A shard
// whose job failed is placed again, away from the providers it failed on,
// up to MaxShardAttempts jobs; the same reason from two providers (or
// twice from no provider: nothing matched) fails the whole array, since a
// third provider would most likely say it again and the renter pays for
// each try.
type Array struct {
	s ArraySnapshot
}

// MaxShardAttempts bounds the jobs one shard is given before its array
// fails.
const MaxShardAttempts = 3

// Array states.
const (
	ArrayRunning   = "running"
	ArrayCompleted = "completed"
	ArrayFailed    = "failed"
	ArrayCancelled = "cancelled"
)

// Shard phases.
const (
	ShardPending  = "pending"   // not submitted (or its job must be submitted again)
	ShardInFlight = "in-flight" // its job is submitted and has not ended
	ShardDone     = "done"      // its job completed
	ShardFailed   = "failed"    // its last job failed; pending again unless the array failed
)

// ArraySnapshot is an Array's whole state, kept as JSON in the array's
// record.
type ArraySnapshot struct {
	ID          string       `json:"id"`
	MaxParallel int          `json:"max_parallel"`
	State       string       `json:"state"`
	Reason      string       `json:"reason,omitempty"`
	Shards      []ArrayShard `json:"shards"`
}

// ArrayShard is one shard's place in its array.
type ArrayShard struct {
	Phase    string         `json:"phase"`
	Job      string         `json:"job,omitempty"` // its current (or last) job
	Attempts int            `json:"attempts"`      // jobs given so far
	Failures []ShardFailure `json:"failures,omitempty"`
	// NoAvoid: the shard's last job found no match while it avoided the
	// busiest providers; it goes on without avoiding them.
	NoAvoid bool `json:"no_avoid,omitempty"`
	// AvoidedBusy: its current job avoids providers for being busy, not
	// for having failed it.
	AvoidedBusy bool `json:"avoided_busy,omitempty"`
	// Waiting: its last job found no match while other shards of the
	// array ran; it is placed again once one of them ends.
	Waiting bool `json:"waiting,omitempty"`
}

// ShardFailure is one failed job of a shard.
type ShardFailure struct {
	Provider string `json:"provider,omitempty"` // "" when none was leased (no match)
	Reason   string `json:"reason"`
}

// ShardSeen is what the node saw of an in-flight shard's job.
type ShardSeen struct {
	Missing   bool   // no such job: recorded as submitted, never submitted (the node stopped between)
	Ended     bool   // the job ended
	Completed bool   // ... and completed
	NoMatch   bool   // ... for want of a match
	Provider  string // its current or last provider, "" if none
	Reason    string // why it ended, if not completed
}

// Action kinds.
const (
	ActSubmit = "submit" // submit shard Shard as job Job, avoiding Avoid
	ActCancel = "cancel" // cancel job Job
)

// ArrayAction is one thing the node must do for the array.
type ArrayAction struct {
	Kind  string
	Shard int
	Job   string
	Avoid []string
}

// NewArray is an array of shards shards, none submitted.
func NewArray(id string, shards, maxParallel int) *Array {
	s := ArraySnapshot{ID: id, MaxParallel: max(1, min(maxParallel, shards)), State: ArrayRunning, Shards: make([]ArrayShard, shards)}
	for i := range s.Shards {
		s.Shards[i].Phase = ShardPending
	}
	return &Array{s: s}
}

// RestoreArray is the array a snapshot kept.
func RestoreArray(s ArraySnapshot) *Array {
	s.Shards = append([]ArrayShard(nil), s.Shards...)
	return &Array{s: s}
}

// Snapshot is a copy of the array's state.
func (a *Array) Snapshot() ArraySnapshot {
	s := a.s
	s.Shards = append([]ArrayShard(nil), a.s.Shards...)
	return s
}

// State is the array's state and, when it failed, why.
func (a *Array) State() (string, string) { return a.s.State, a.s.Reason }

// ShardJob is the ID of attempt n (1-based) of shard i's job: derived, so
// that a node that stopped after keeping the snapshot and before
// submitting submits the same job again.
func ShardJob(array string, i, n int) string {
	if n <= 1 {
		return fmt.Sprintf("%s-s%d", array, i)
	}
	return fmt.Sprintf("%s-s%d-%d", array, i, n)
}

// Step takes what the node saw of the in-flight shards' jobs (by shard
// index) and returns what to do next. providers is how many providers
// the node knows could take a shard (0: unknown), for spreading.
func (a *Array) Step(seen map[int]ShardSeen, providers int) []ArrayAction {
	var acts []ArrayAction
	freed := 0 // shards' jobs that ended holding a lease: room for a waiting shard each
	for i := range a.s.Shards {
		sh := &a.s.Shards[i]
		o, ok := seen[i]
		if sh.Phase != ShardInFlight || !ok {
			continue
		}
		switch {
		case o.Missing:
			sh.Phase = ShardPending
			sh.Attempts-- // the same job, submitted again
		case !o.Ended:
		case o.Completed:
			sh.Phase = ShardDone
			freed++
		default:
			if !o.NoMatch {
				freed++
			}
			acts = append(acts, a.shardFailed(i, o)...)
		}
	}
	if a.s.State != ArrayRunning {
		return acts
	}
	done := 0
	for _, sh := range a.s.Shards {
		if sh.Phase == ShardDone {
			done++
		}
	}
	if done == len(a.s.Shards) {
		a.s.State = ArrayCompleted
		return acts
	}
	return append(acts, a.place(seen, providers, freed)...)
}

// shardFailed records shard i's failed job and decides whether the
// array fails with it.
func (a *Array) shardFailed(i int, o ShardSeen) []ArrayAction {
	sh := &a.s.Shards[i]
	sh.Phase = ShardFailed
	if o.NoMatch && sh.AvoidedBusy {
		// Avoiding the busy providers left nothing: not the shard's
		// fault, so it costs no attempt's failure.
		sh.NoAvoid = true
		sh.Phase = ShardPending
		return nil
	}
	if o.NoMatch && a.othersInFlight(i) {
		// The book is full for now, most likely with this array's own
		// shards (max_parallel above what the market holds at once): the
		// shard waits for one of them to end rather than counting a
		// failure, and is placed again then (place holds it back while
		// its siblings run).
		sh.Phase, sh.Waiting = ShardPending, true
		return nil
	}
	f := ShardFailure{Provider: o.Provider, Reason: o.Reason}
	for _, p := range sh.Failures {
		if p.Reason == f.Reason && (p.Provider != f.Provider || f.Provider == "") {
			return a.fail(fmt.Sprintf("shard %d failed the same way on two providers: %s", i, f.Reason))
		}
	}
	sh.Failures = append(sh.Failures, f)
	if len(sh.Failures) >= MaxShardAttempts {
		return a.fail(fmt.Sprintf("shard %d failed %d times; the last: %s", i, len(sh.Failures), f.Reason))
	}
	if a.s.State == ArrayRunning {
		sh.Phase = ShardPending
	}
	return nil
}

// fail ends the array with reason and cancels its shards in flight:
// nothing more is bought for an array that cannot complete.
func (a *Array) fail(reason string) []ArrayAction {
	if a.s.State != ArrayRunning {
		return nil
	}
	a.s.State, a.s.Reason = ArrayFailed, reason
	return a.stopAll()
}

// Cancel ends the array at the renter's request.
func (a *Array) Cancel() []ArrayAction {
	if a.s.State != ArrayRunning {
		return nil
	}
	a.s.State = ArrayCancelled
	return a.stopAll()
}

func (a *Array) stopAll() []ArrayAction {
	var acts []ArrayAction
	for i := range a.s.Shards {
		sh := &a.s.Shards[i]
		switch sh.Phase {
		case ShardInFlight:
			acts = append(acts, ArrayAction{Kind: ActCancel, Shard: i, Job: sh.Job})
			sh.Phase = ShardFailed
		case ShardPending:
			sh.Phase = ShardFailed
		}
	}
	return acts
}

// place submits pending shards, lowest index first, up to MaxParallel in
// flight. A new shard avoids the providers it failed on and, when the
// node knows how many providers there are, those already holding their
// fair share (ceil(MaxParallel / providers)) of the array's shards, so
// that one large provider does not take every shard while others are
// free; the auction's ranking decides among the rest.
func (a *Array) place(seen map[int]ShardSeen, providers, freed int) []ArrayAction {
	inFlight := 0
	held := map[string]int{}
	for i, sh := range a.s.Shards {
		if sh.Phase == ShardInFlight {
			inFlight++
			if p := seen[i].Provider; p != "" {
				held[p]++
			}
		}
	}
	// A shard waiting for a full book holds back every placement but one
	// per sibling that just ended: the market holds no more of the
	// array's shards at once than are in flight.
	budget := -1 // no bound but MaxParallel
	for _, sh := range a.s.Shards {
		if sh.Waiting && sh.Phase == ShardPending && inFlight > 0 {
			budget = freed
			break
		}
	}
	var acts []ArrayAction
	for i := range a.s.Shards {
		if inFlight >= a.s.MaxParallel {
			break
		}
		sh := &a.s.Shards[i]
		if sh.Phase != ShardPending {
			continue
		}
		if budget == 0 {
			break
		}
		budget--
		sh.Waiting = false
		sh.Attempts++
		sh.Phase, sh.Job = ShardInFlight, ShardJob(a.s.ID, i, sh.Attempts)
		inFlight++
		avoid, busy := a.avoid(sh, held, providers)
		sh.AvoidedBusy = busy
		acts = append(acts, ArrayAction{Kind: ActSubmit, Shard: i, Job: sh.Job, Avoid: avoid})
	}
	return acts
}

// avoid is the providers a new job of sh avoids, and whether any is
// avoided for being busy.
func (a *Array) avoid(sh *ArrayShard, held map[string]int, providers int) ([]string, bool) {
	set := map[string]bool{}
	busyAvoided := false
	for _, f := range sh.Failures {
		if f.Provider != "" {
			set[f.Provider] = true
		}
	}
	if providers > 1 && !sh.NoAvoid {
		fair := (a.s.MaxParallel + providers - 1) / providers
		busy := 0
		for p, n := range held {
			if n >= fair && !set[p] {
				busy++
				if busy < providers { // never avoid every provider known
					set[p], busyAvoided = true, true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, busyAvoided
}

// ArrayProgress counts the shards by phase.
type ArrayProgress struct {
	Shards, Done, InFlight, Pending, Failed int
}

// Progress is the array's shards counted by phase.
func (a *Array) Progress() ArrayProgress {
	p := ArrayProgress{Shards: len(a.s.Shards)}
	for _, sh := range a.s.Shards {
		switch sh.Phase {
		case ShardDone:
			p.Done++
		case ShardInFlight:
			p.InFlight++
		case ShardPending:
			p.Pending++
		case ShardFailed:
			p.Failed++
		}
	}
	return p
}

// othersInFlight reports whether a shard other than i has a job in flight.
func (a *Array) othersInFlight(i int) bool {
	for k, sh := range a.s.Shards {
		if k != i && sh.Phase == ShardInFlight {
			return true
		}
	}
	return false
}
