package service

import (
	"fmt"
	"math"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// autoscaler decides how many replicas a service runs (docs/SERVICES.md,
// "Autoscaling"). The reconciler asks it once per Tick.
//
// Without autoscale it always wants replicas.min. With it, the load is the
// gateway's service QPS (target_qps_per_replica) or requests in flight
// (target_concurrency), in thousandths, and:
//
//   - need = ceil(load / target) replicas hold the load at the target;
//     need > current is over the target, as is any load with no replica
//     ready;
//   - fit = ceil(load / (80% of target)) is the deadband: the load is
//     under the target only when current-1 replicas would carry it at
//     80% of the target or less, so removing one does not make the next
//     sample add it back;
//   - over for scale_up_after without a break adds one replica (up to
//     replicas.max), under for scale_down_after removes one (down to
//     replicas.min); a sample that is not over resets the up window, one
//     that is not under the down window;
//   - while fewer replicas are ready than run (a new replica is being
//     auctioned, started or loading), nothing changes and both windows
//     stay reset: the pending replicas are capacity being added. The hold
//     ends after readiness.initial_delay plus SettleMax, so that a
//     replica that never gets ready does not freeze the service;
//   - a current outside min..max is brought back at once.
type autoscaler struct {
	svc auction.Service

	upSince, downSince time.Time // when the load went over / under without a break; zero: it is not
	pendingSince       time.Time // when fewer replicas were ready than ran; zero: all were
}

// SettleMax bounds how long replicas that are not ready yet hold the
// autoscaler, beyond readiness.initial_delay: an auction, a start and an
// image pull.
const SettleMax = 10 * time.Minute

// Load is what the autoscaler reads of the gateway: the service's QPS and
// requests in flight, and how many of the replicas it counts (the
// service's, not the pending successors) are ready.
type Load struct {
	QPS         float64
	Outstanding int64
	Ready       int
}

func newAutoscaler(svc auction.Service) *autoscaler { return &autoscaler{svc: svc} }

// want returns how many replicas the service should run at now, given the
// gateway's figures and the number it runs (current), and why it changed
// (empty when it did not).
func (a *autoscaler) want(now time.Time, st Load, current int) (n int, why string) {
	lo, hi := a.svc.Replicas.Min, max(a.svc.Replicas.Max, a.svc.Replicas.Min)
	as := a.svc.Autoscale
	if !as.Enabled() {
		hi = lo
	}
	switch {
	case current < lo:
		a.reset()
		return lo, fmt.Sprintf("below replicas.min %d: %d → %d", lo, current, lo)
	case current > hi:
		a.reset()
		return hi, fmt.Sprintf("above replicas.max %d: %d → %d", hi, current, hi)
	case !as.Enabled():
		return current, ""
	}

	ready := st.Ready
	if ready < current {
		if a.pendingSince.IsZero() || now.Before(a.pendingSince) {
			a.pendingSince = now
		}
		if now.Sub(a.pendingSince) < a.svc.Readiness.InitialDelay+SettleMax {
			a.upSince, a.downSince = time.Time{}, time.Time{}
			return current, ""
		}
	} else {
		a.pendingSince = time.Time{}
	}

	// Load and target in thousandths: milli-requests per second, or
	// requests in flight × 1,000.
	kind, load, target := "qps", milliQPS(st.QPS), int64(as.TargetQPS)
	if as.TargetConcurrency > 0 {
		kind, load, target = "concurrency", max(st.Outstanding, 0)*1000, int64(as.TargetConcurrency)*1000
	}
	need := ceilDiv(load, target)
	fit := ceilDiv(load*5, target*4)
	over := need > int64(current) || ready == 0 && load > 0
	under := !over && fit < int64(current)

	if over && current < hi {
		if since, ok := a.window(&a.upSince, now, upAfter(as)); ok {
			a.reset()
			if ready == 0 {
				return current + 1, fmt.Sprintf("%s %s with no replica ready for %s: %d → %d",
					kind, auction.MilliQPS(load), windowString(since), current, current+1)
			}
			return current + 1, fmt.Sprintf("%s over target %s for %s: %d → %d",
				perReady(kind, load, ready), auction.MilliQPS(target), windowString(since), current, current+1)
		}
	} else {
		a.upSince = time.Time{}
	}
	if under && current > lo {
		if since, ok := a.window(&a.downSince, now, downAfter(as)); ok {
			a.reset()
			return current - 1, fmt.Sprintf("%s under 80%% of target %s on %d for %s: %d → %d",
				perReady(kind, load, ready), auction.MilliQPS(target), current-1, windowString(since), current, current-1)
		}
	} else {
		a.downSince = time.Time{}
	}
	return current, ""
}

// window starts *since at now if it is not running (or the clock went
// back), and reports how long it has run once that is at least after.
func (a *autoscaler) window(since *time.Time, now time.Time, after time.Duration) (time.Duration, bool) {
	if since.IsZero() || now.Before(*since) {
		*since = now
	}
	d := now.Sub(*since)
	return d, d >= after
}

func (a *autoscaler) reset() {
	a.upSince, a.downSince, a.pendingSince = time.Time{}, time.Time{}, time.Time{}
}

func upAfter(as auction.Autoscale) time.Duration {
	if as.ScaleUpAfter > 0 {
		return as.ScaleUpAfter
	}
	return auction.DefaultScaleUpAfter
}

func downAfter(as auction.Autoscale) time.Duration {
	if as.ScaleDownAfter > 0 {
		return as.ScaleDownAfter
	}
	return auction.DefaultScaleDownAfter
}

// milliQPS is a gateway rate in thousandths, rounded; nonsense reads 0.
func milliQPS(q float64) int64 {
	if !(q > 0) || math.IsInf(q, 0) {
		return 0
	}
	return int64(math.Min(math.Round(q*1000), math.MaxInt64/8))
}

func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// perReady says the load per ready replica: "qps 7.5 per replica".
func perReady(kind string, load int64, ready int) string {
	if ready == 0 {
		return fmt.Sprintf("%s %s with no replica ready,", kind, auction.MilliQPS(load))
	}
	return fmt.Sprintf("%s %s per replica", kind, auction.MilliQPS(load/int64(ready)))
}

// windowString writes a window as the spec does: 10s, 5m, 1h, 1m30s.
func windowString(d time.Duration) string {
	d = d.Truncate(time.Second)
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
