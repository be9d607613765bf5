package renter

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Refusal is a provider's typed refusal of a start or an attach, as the
// job protocol carries it; node/wire's codes convert to it by value.
type Refusal string

// The refusals the renter acts on; any other ends the job as the
// provider's failure.
const (
	// RefusalNoLease: the provider holds no active lease for the job.
	RefusalNoLease Refusal = "no-lease"
	// RefusalDisplaced: the award was not started within its grace and
	// another award took its GPUs.
	RefusalDisplaced Refusal = "displaced"
	// RefusalExpired: the award was not started in time.
	RefusalExpired Refusal = "expired"
	// RefusalStarted: the lease has started already: attach to it.
	RefusalStarted Refusal = "started"
	// RefusalNotRunning: the lease is held but its job does not run (a
	// restarted provider held it again): start it again.
	RefusalNotRunning Refusal = "not-running"
)

// RefusalMeaning is what a refusal means for the job.
type RefusalMeaning uint8

const (
	// RefusalFinal: the refusal ends the job as it says.
	RefusalFinal RefusalMeaning = iota
	// RefusalUndecided: the provider, reached again after a loss (or
	// this node's restart), refused: the re-attach policy decides
	// (Reattach.After); by default it is the provider's failure.
	RefusalUndecided
	// RefusalNotStarted: the first start, and the provider holds the
	// award no more. Nothing ran, nothing is charged, and the job is
	// auctioned again (Lifecycle.Ended with EndNotStarted and the
	// cause Refused returns).
	RefusalNotStarted
)

// Refused says what refusal r of the renter's request means. start: the
// request was the job's start (not an attach); again: the provider was
// lost before, or this node restarted. For a first start refused as not
// started, cause is why: the renter's own slowness (displaced), a bronze
// award taken back by a claim of a better tier, or the provider's part.
func Refused(r Refusal, start, again bool, tier auction.Tier) (m RefusalMeaning, cause StartCause) {
	switch {
	case again && (r == RefusalNoLease || r == RefusalStarted || r == RefusalNotRunning):
		return RefusalUndecided, StartOther
	case start && (r == RefusalNoLease || r == RefusalDisplaced || r == RefusalExpired):
		switch {
		case r == RefusalDisplaced:
			return RefusalNotStarted, StartDisplaced
		case tier == auction.Bronze:
			return RefusalNotStarted, StartTakenBack
		}
		return RefusalNotStarted, StartOther
	}
	return RefusalFinal, StartOther
}

// How long a renter comes back to a lost provider's lease: a reservation
// waiting for its window for ReserveRetry (a provider restarting keeps
// it, and has time), a service's replica not at all (its service places
// another at once) unless the stream it lost ran through a relay, any
// other job for ReattachFor (a provider restarting re-attaches to the
// container it left running). Never past the lease's last notice; the
// waits between tries grow from a second to MaxReconnectWait.
//
// A replica reached through a relay (its provider behind a NAT that hole
// punching cannot cross) loses its stream whenever the relay resets the
// circuit at its limits (an hour, 64 MiB each way by default: p2p's
// RelayResources), while the provider and its container are fine; with
// no other provider to place it on, giving it up would take the service
// down once an hour. So it is come back to, through the relay again,
// for ReplicaRelayedFor: a new circuit takes a second or two, and a
// provider really gone is given up that much later.
const (
	ReattachFor       = 60 * time.Second
	ReserveRetry      = 2 * time.Minute
	ReplicaRelayedFor = 15 * time.Second
	MaxReconnectWait  = 10 * time.Second
	// maxFlips bounds how often the renter switches between a start and
	// an attach on the provider's word, so two confused peers cannot
	// loop.
	maxFlips = 2
)

// ReattachBound is how long a renter comes back to a lost provider for a
// job: reserved (a reservation waiting for its window), replica (a
// service's), relayed (the stream lost ran over a relayed connection).
func ReattachBound(reserved, replica, relayed bool) time.Duration {
	switch {
	case replica && relayed:
		return ReplicaRelayedFor
	case replica:
		return 0
	case reserved:
		return ReserveRetry
	}
	return ReattachFor
}

// Reattach is the renter's policy for one lease's follow: after each try
// (a start or an attach that ended), whether to try again, attach or
// start, how long to wait first, or to give the run up. It does no I/O
// and reads no clock: the caller passes now.
type Reattach struct {
	hasStart bool      // the renter holds the job's start (its first, or one it may send again)
	attach   bool      // the next try attaches
	flips    int       // switches between start and attach on the provider's word
	over     time.Time // the lease's last notice ends: nothing of it runs after
	lostAt   time.Time // when the provider was first lost; zero while it was not
	deadline time.Time
	wait     time.Duration
}

// NewReattach is the policy for following a lease. hasStart: the renter
// sends the job's start (false: it can only attach, after a restart);
// over is when the lease's last notice ends.
func NewReattach(hasStart bool, over time.Time) *Reattach {
	return &Reattach{hasStart: hasStart, attach: !hasStart, over: over, wait: time.Second}
}

// Attach reports whether try (0 the first) attaches, else it sends the
// start. begun: the job's container ran on this lease, so a try after the
// first attaches.
func (r *Reattach) Attach(try int, begun bool) bool {
	return r.attach || try > 0 && begun
}

// Attaching reports whether the policy has turned to attaching (the
// provider said the lease started, or the renter holds no start).
func (r *Reattach) Attaching() bool { return r.attach }

// Lost reports whether the provider was lost on this lease, and when.
func (r *Reattach) Lost() (time.Time, bool) { return r.lostAt, !r.lostAt.IsZero() }

// TryEnd is how one try ended, as After needs it.
type TryEnd struct {
	Refusal Refusal // the provider's refusal, if it refused
	Lost    bool    // the provider could not be reached, or its stream broke
	// Bound is how long to come back to the provider were this its
	// first loss: ReattachBound for the job as it stands now.
	Bound time.Duration
	// Heard: the provider answered this try with the job's own events
	// (its state, a heartbeat, output), not only a refusal: it was back,
	// following the job, before the stream ended. The loss before it is
	// over, and a loss after it is a new one, with its own bound.
	Heard bool
}

// ReattachDo is what follows a try.
type ReattachDo uint8

const (
	// ReattachReturn: the run is over as the try ended.
	ReattachReturn ReattachDo = iota
	// ReattachReturnLost: give the run up as the provider was first lost
	// (the job is auctioned again, as that loss says).
	ReattachReturnLost
	// ReattachNoSecrets: the provider must be sent the job's start
	// again, which the renter no longer holds (a restart): the job fails.
	ReattachNoSecrets
	// ReattachAgain: try again after Wait (0: at once).
	ReattachAgain
)

// ReattachStep is After's decision.
type ReattachStep struct {
	Do   ReattachDo
	Wait time.Duration // for ReattachAgain
	Left time.Duration // of the coming back, for the job's note
	// NoLease: the provider, reached again, holds the lease no more
	// (ReattachReturnLost says so).
	NoLease bool
}

// After decides what follows a try that ended as e, at now.
//
// The bound counts from a loss until the provider is heard again, not
// from the run's first loss: a run whose stream a relay resets every few
// minutes (its circuits' limit) is come back to after each reset, in
// whichever phase the job is (reserved, fetching its inputs, pulling,
// starting, running), and is given up only when the provider stays
// silent for a whole bound.
func (r *Reattach) After(now time.Time, e TryEnd) ReattachStep {
	if e.Heard && !r.lostAt.IsZero() {
		r.lostAt, r.deadline, r.wait, r.flips = time.Time{}, time.Time{}, time.Second, 0
	}
	switch {
	case e.Refusal == RefusalStarted && r.flips < maxFlips:
		r.attach, r.flips = true, r.flips+1 // the provider still has the first start: follow it
		return ReattachStep{Do: ReattachAgain}
	case e.Refusal == RefusalNotRunning && r.hasStart && r.flips < maxFlips:
		r.attach, r.flips = false, r.flips+1 // it holds the lease, restored by a restart: start it again
		return ReattachStep{Do: ReattachAgain}
	case e.Refusal == RefusalNotRunning && !r.hasStart:
		return ReattachStep{Do: ReattachNoSecrets}
	case e.Refusal == RefusalNoLease && !r.lostAt.IsZero():
		// The provider did not keep the lease (it restarted without its
		// job): given up at once, as the first loss says.
		return ReattachStep{Do: ReattachReturnLost, NoLease: true}
	case !e.Lost:
		return ReattachStep{Do: ReattachReturn}
	}
	if r.lostAt.IsZero() {
		r.lostAt = now
		r.deadline = now.Add(e.Bound)
		if r.over.Before(r.deadline) {
			r.deadline = r.over
		}
	}
	left := r.deadline.Sub(now)
	if left <= 0 {
		return ReattachStep{Do: ReattachReturnLost}
	}
	step := ReattachStep{Do: ReattachAgain, Wait: min(r.wait, left), Left: left}
	r.wait = min(2*r.wait, MaxReconnectWait)
	return step
}
