package node

import (
	"fmt"
	"time"
)

// A replica that runs but never passes its readiness check (a wrong port
// or path, a model that cannot load) takes no traffic and would be paid
// for as long as its lease lasts. So once its job has run for
// readiness.initial_delay plus the services' readyGrace (settleMax, 10
// minutes, the same bound after which the autoscaler stops waiting for
// it) without ever being ready, it is given up: its job is cancelled,
// which ends its billing with the interval in progress, and it is healed
// like any replica that ended without being ready: replaced, with
// back-off, and after serviceHealLimit such replicas in a row no more are
// bought and service_status says why.

// notReadyFor is why replica id is given up at now, or "" while it may
// still get ready.
func (k *keeper) notReadyFor(id string, now time.Time) string {
	since, ok := k.addedAt[id]
	if !ok || k.everReady[id] || k.spec == nil {
		return ""
	}
	rd := k.spec.Service.Readiness
	limit := rd.InitialDelay + k.s.readyGrace
	if now.Sub(since) < limit {
		return ""
	}
	return fmt.Sprintf("not ready %v after it started: its readiness check (GET %s on port %d) never passed; check the port and path, or set readiness.initial_delay to how long it takes to load",
		limit.Round(time.Second), rd.Path, k.spec.Service.Port)
}

// giveUpUnready cancels, once each, the replicas among reps that are not
// ready in time (notReadyFor), and returns their job IDs; sync then heals
// them as ended, with the reason kept in k.gaveUp.
func (k *keeper) giveUpUnready(reps []string, now time.Time) []string {
	var out []string
	for _, id := range reps {
		if _, done := k.gaveUp[id]; done {
			continue
		}
		if why := k.notReadyFor(id, now); why != "" {
			k.gaveUp[id] = why
			k.s.log.Warn("service replica given up", "service", k.name, "job", id, "why", why)
			out = append(out, id)
		}
	}
	return out
}
