package service

import (
	"fmt"
	"time"
)

// Make-before-break renewal (docs/SERVICES.md, "A lease's end"): each
// replica's job runs for its lease, the spec's duration.max, and is then
// stopped by its provider. A service must outlive its leases without a
// gap, so when a ready replica's lease is within renewMargin of its end
// the reconciler places a successor for the same index (a Place of kind
// Renew, excluding the providers of the live replicas, the old one
// included). Once the successor is ready in the gateway it takes the
// index; the old replica is retired (drained out of the gateway, the
// requests in flight on it answered, then its job cancelled, which ends
// its billing with the interval in progress). A successor that fails is
// dropped: the old replica serves to its end, and healing replaces it
// then. A successor still loading when the old lease ends takes the index
// as its replacement (it was bought for that), under healing's rules.
//
// The pending successors are in the Record (Renewing), so that a renter
// restarted mid-renewal neither loses a successor (paid for) nor buys a
// second one.

// RenewAllowance is what a successor needs beyond readiness.initial_delay
// to take over: an auction (a few seconds of quotes and sealed bids), the
// container's start with the image cached, and slack for one failed
// auction to be run again.
const RenewAllowance = 60 * time.Second

// renewMargin is how long before its lease's end a replica gets its
// successor: readiness.initial_delay plus RenewAllowance, but at most half
// the lease, so that a short lease is renewed in its second half rather
// than as soon as it starts (a lease shorter than the margin would
// otherwise be renewed at once, forever).
func renewMargin(initialDelay, lease time.Duration) time.Duration {
	return max(min(initialDelay+RenewAllowance, lease/2), 0)
}

// replicaLease is what the renewal decision needs to know of a replica.
type replicaLease struct {
	Running    bool      // its job runs
	EverReady  bool      // it has passed its readiness check
	Start, End time.Time // its current lease; End zero when unknown
	Renewing   bool      // a successor is already bought
	Tried      bool      // a successor was bought for this lease and failed
}

// renewDue says whether replica r gets a successor at now, and why (for
// the log).
func renewDue(now time.Time, r replicaLease, initialDelay time.Duration) (bool, string) {
	if !r.Running || !r.EverReady || r.Renewing || r.Tried || r.End.IsZero() || !now.Before(r.End) {
		return false, ""
	}
	margin := renewMargin(initialDelay, r.End.Sub(r.Start))
	if left := r.End.Sub(now); left > margin {
		return false, ""
	}
	return true, fmt.Sprintf("its lease ends at %s, in %s (renewed %s ahead: readiness.initial_delay %s + %s, at most half the lease)",
		r.End.UTC().Format(time.RFC3339), r.End.Sub(now).Round(time.Second), margin, initialDelay, RenewAllowance)
}
