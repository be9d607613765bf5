package service

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Tick decides, at now, what the service needs given what the node
// observed: the successors ready to take their index, the replicas given
// up as never ready, why none is placed, the replicas to replace and to
// add or remove, and the successors to buy. The Record changes at once for
// what needs no I/O (a handover, a removal, healing's counts); a Place
// changes it only once Placed reports its job.
func (r *Reconciler) Tick(now time.Time, o Observed) []Action {
	var acts []Action
	ready := map[string]bool{}
	for _, g := range o.Gateway {
		if g.Ready {
			r.everReady[g.ID] = true
			ready[g.ID] = true
		}
	}
	changed := r.settle(o, ready, &acts)
	// Replicas not ready in time are cancelled first, healing or not: they
	// must not run on unpaid for; they are replaced once their jobs show
	// cancelled.
	r.giveUp(now, o, &acts)
	// Before the ended replicas are replaced below: what their jobs say
	// of why none is placed.
	if r.placement(o, &acts) {
		changed = true
	}
	rec := &r.rec
	for _, id := range rec.Replicas {
		if r.everReady[id] {
			r.noMatches = 0
			if rec.Unready != 0 {
				rec.Unready, rec.HealError, changed = 0, "", true
			}
		}
	}
	want := r.target(now, o, &acts)
	if r.heal(now, o, want, &acts) {
		changed = true
	}
	for i := len(rec.Replicas); i < want && rec.HealError == ""; i++ {
		acts = append(acts, Place{Kind: Add, Index: i, Spec: ReplicaSpec(r.spec, i, now), Exclude: r.held(o, ""),
			Why: fmt.Sprintf("the target is %d", want)})
	}
	for len(rec.Replicas) > want {
		i := len(rec.Replicas) - 1
		id := rec.Replicas[i]
		rec.Replicas = rec.Replicas[:i]
		acts = append(acts, Log{Msg: "service replica removed", Args: []any{"service", r.name, "index", i, "job", id, "target", want}},
			Release{id}, Cancel{id}, Drop{id})
		delete(rec.Notes, id)
		delete(r.gaveUp, id)
		if succ := rec.Renewing[id]; succ != "" {
			// Its successor goes with it.
			delete(rec.Renewing, id)
			acts = append(acts, Release{succ}, Cancel{succ}, Drop{succ})
		}
		changed = true
	}
	r.renew(now, o, &acts)
	if changed {
		acts = append(acts, Save{})
	}
	return acts
}

// Placed reports the job the node bought for p, or why it could not, and
// whether the Tick's other placements of p's kind are still wanted. A
// replacement takes its index (healing's back-off starts from it), an
// added replica the next one, a successor its replica's Renewing entry.
// A replacement that could not be bought holds healing off HealBackoffMax.
func (r *Reconciler) Placed(now time.Time, p Place, job string, err error) bool {
	rec := &r.rec
	switch p.Kind {
	case Replace:
		if err != nil {
			r.nextHeal = now.Add(HealBackoffMax)
			return false
		}
		i := p.Index
		if i >= len(rec.Replicas) || rec.Replicas[i] != p.Old {
			return true // not the Tick's record any more; the job is an orphan (none is made: the node ticks and places in turn)
		}
		if rec.Notes == nil {
			rec.Notes = map[string]string{}
		}
		delete(rec.Notes, p.Old)
		rec.Notes[job] = fmt.Sprintf("replaces %s (replica %d): %s", p.Old, i, p.Why)
		rec.Replicas[i] = job
		rec.Replaced++
		delete(r.gaveUp, p.Old)
		if p.noMatch {
			r.noMatches++
			r.nextHeal = now.Add(HealBackoff(r.cfg.HealStep, r.noMatches))
		} else if rec.Unready > 0 {
			r.nextHeal = now.Add(HealBackoff(r.cfg.HealStep, rec.Unready))
		}
	case Add:
		if err != nil || p.Index != len(rec.Replicas) {
			return false // a later index must not take this one's place (its floor, its placement entry)
		}
		rec.Replicas = append(rec.Replicas, job)
	case Renew:
		if err != nil {
			return true // the replica serves to its lease's end, then is healed
		}
		if rec.Renewing == nil {
			rec.Renewing = map[string]string{}
		}
		rec.Renewing[p.Old] = job
	}
	return true
}

// settle hands each index whose successor is ready (or whose old job has
// ended) to the successor, and drops successors that failed; before
// healing, so that healing sees the successor at the index.
func (r *Reconciler) settle(o Observed, ready map[string]bool, acts *[]Action) (changed bool) {
	rec := &r.rec
	for i, id := range rec.Replicas {
		succ := rec.Renewing[id]
		if succ == "" {
			continue
		}
		sj, ok := o.Jobs[succ]
		if !ok || sj.Phase.Ended() {
			why := "its job is gone"
			if ok {
				why = endedWhy(sj)
			}
			*acts = append(*acts, Log{Warn: true, Msg: "service renewal failed: the replica serves to its lease's end, then is healed",
				Args: []any{"service", r.name, "index", i, "job", id, "successor", succ, "why", why}}, Drop{succ})
			delete(rec.Renewing, id)
			changed = true
			continue
		}
		oj, ok := o.Jobs[id]
		ended := !ok || oj.Phase.Ended()
		if !ready[succ] && !ended {
			continue
		}
		why := "ready before the lease's end"
		if ended {
			why = "its lease ended before the successor was ready"
		}
		*acts = append(*acts, Log{Msg: "service replica renewed", Args: []any{"service", r.name, "index", i, "old", id, "new", succ, "why", why}}, Release{id})
		if rec.Notes == nil {
			rec.Notes = map[string]string{}
		}
		rec.Notes[succ] = fmt.Sprintf("renews %s (replica %d): %s", id, i, why)
		delete(rec.Notes, id)
		delete(rec.Renewing, id)
		delete(r.gaveUp, id)
		rec.Replicas[i] = succ
		rec.Renewed++
		changed = true
		if ended {
			*acts = append(*acts, Drop{id})
		} else {
			*acts = append(*acts, Retire{id})
		}
	}
	return changed
}

// giveUp cancels, once each, the replicas that run but are not ready in
// time (notReadyFor); healing then replaces them as ended, with the
// reason kept for the replacement's note.
func (r *Reconciler) giveUp(now time.Time, o Observed, acts *[]Action) {
	for _, id := range r.rec.Replicas {
		if _, done := r.gaveUp[id]; done {
			continue
		}
		if why := r.notReadyFor(id, o.Jobs[id], now); why != "" {
			r.gaveUp[id] = why
			*acts = append(*acts, Log{Warn: true, Msg: "service replica given up", Args: []any{"service", r.name, "job", id, "why", why}}, Cancel{id})
		}
	}
}

// A replica that runs but never passes its readiness check (a wrong port
// or path, a model that cannot load) takes no traffic and would be paid
// for as long as its lease lasts. So once its run has been in the gateway
// for readiness.initial_delay plus ReadyGrace (SettleMax, the same bound
// after which the autoscaler stops waiting for it) without ever being
// ready, it is given up: cancelled, and healed like any replica that
// ended without being ready.

// notReadyFor is why replica id (job j) is given up at now, or "" while
// it may still get ready.
func (r *Reconciler) notReadyFor(id string, j Job, now time.Time) string {
	if j.Serving.IsZero() || r.everReady[id] {
		return ""
	}
	rd := r.spec.Service.Readiness
	limit := rd.InitialDelay + r.cfg.ReadyGrace
	if now.Sub(j.Serving) < limit {
		return ""
	}
	return fmt.Sprintf("not ready %v after it started: its readiness check (GET %s on port %d) never passed; check the port and path, or set readiness.initial_delay to how long it takes to load",
		limit.Round(time.Second), rd.Path, r.spec.Service.Port)
}

// placement keeps rec.NotPlaced: once every replica index has had an
// attempt end without being placed since a replica last was, the latest
// such attempt's why; cleared as soon as a replica is placed. Healing
// goes on buying (the market may change), so NotPlaced is what makes an
// empty market, or a spec no provider can run, visible in service_status
// instead of a loop of silent no-matches. It reports whether rec changed.
func (r *Reconciler) placement(o Observed, acts *[]Action) bool {
	rec := &r.rec
	placed := false
	for i, id := range rec.Replicas {
		j, ok := o.Jobs[id]
		if !ok {
			continue
		}
		if j.Phase.Placed() {
			placed = true
			continue
		}
		if u, seen := r.unplaced[i]; endedUnplaced(j) && (!seen || u.job != id) {
			r.unplaced[i] = unplacedEnd{job: id, why: fmt.Sprintf("replica %d (job %s) %s", i, id, j.Why), at: j.Updated}
		}
	}
	for i := range r.unplaced {
		if i >= len(rec.Replicas) {
			delete(r.unplaced, i) // scaled down
		}
	}
	why := rec.NotPlaced
	switch {
	case placed:
		clear(r.unplaced)
		why = ""
	case len(rec.Replicas) > 0 && len(r.unplaced) == len(rec.Replicas):
		var latest unplacedEnd
		for _, u := range r.unplaced {
			if latest.job == "" || u.at.After(latest.at) {
				latest = u
			}
		}
		why = latest.why
	}
	if why == rec.NotPlaced {
		return false
	}
	if why != "" {
		*acts = append(*acts, Log{Warn: true, Msg: "service replicas not placed", Args: []any{"service", r.name, "why", why}})
	} else {
		*acts = append(*acts, Log{Msg: "service replica placed", Args: []any{"service", r.name}})
	}
	rec.NotPlaced = why
	return true
}

// endedUnplaced reports whether a replica's job ended without a provider
// ever running it: no provider took it, or those that took it could not
// start it (failed before it ran: an image none could pull).
func endedUnplaced(j Job) bool {
	return j.Phase == NoMatch || j.Phase == Failed && !j.Started
}

// target is how many replicas the service should run: the count fixed by
// service_scale, else the autoscaler's (within replicas.min..max), else
// replicas.min; never fewer than the floor.
func (r *Reconciler) target(now time.Time, o Observed, acts *[]Action) int {
	svc := r.spec.Service
	current := len(r.rec.Replicas)
	n := o.Scale
	if n <= 0 {
		n = svc.Replicas.Min
		if svc.Autoscale.Enabled() {
			var why string
			n, why = r.as.want(now, r.load(o), current)
			hi := max(svc.Replicas.Max, svc.Replicas.Min)
			n = min(max(n, svc.Replicas.Min), hi)
			if why != "" && n != current {
				*acts = append(*acts, Log{Msg: "service autoscale", Args: []any{"service", r.name, "from", current, "to", n, "why", why}})
			}
		}
	}
	return min(max(n, svc.Floor.Replicas, 1), auction.MaxServiceReplicas)
}

// load is the gateway's figures as the autoscaler counts them: without
// the pending successors, which are not capacity being added (each
// replaces one), so that one neither holds the autoscaler while it loads
// nor counts as a ready replica once it is.
func (r *Reconciler) load(o Observed) Load {
	l := Load{QPS: o.QPS, Outstanding: o.Outstanding}
	succ := map[string]bool{}
	for _, id := range r.rec.Renewing {
		succ[id] = true
	}
	for _, g := range o.Gateway {
		if g.Ready && !succ[g.ID] {
			l.Ready++
		}
	}
	return l
}

// heal replaces each replica below want whose job ended by a new one at
// its index (so a floor replica keeps the floor's tier), under healing's
// back-off and limit. A replica at want or above is removed instead.
func (r *Reconciler) heal(now time.Time, o Observed, want int, acts *[]Action) (changed bool) {
	rec := &r.rec
	for i, id := range rec.Replicas {
		if i >= want {
			break
		}
		j, ok := o.Jobs[id]
		if ok && !j.Phase.Ended() {
			continue
		}
		if rec.HealError != "" || now.Before(r.nextHeal) {
			continue
		}
		why, prov := "its job is gone", ""
		if ok {
			why, prov = endedWhy(j), j.Provider
		}
		if w, ok := r.gaveUp[id]; ok {
			why = "cancelled: " + w
		}
		// One no provider took never ran: the market's doing, not the
		// spec's, so it is replaced but not counted, and a service whose
		// supply is gone for a while heals once it is back instead of
		// stopping with an error that blames its readiness check.
		noMatch := ok && j.Phase == NoMatch
		if !noMatch && !r.everReady[id] {
			rec.Unready++
			changed = true
			if rec.Unready >= HealLimit {
				rec.HealError = fmt.Sprintf("%d replicas in a row ended without passing their readiness check (the last: %s); no more are bought: fix the spec and `gleaner service down %s`, then up again", rec.Unready, why, r.name)
				*acts = append(*acts, Log{Warn: true, Msg: "service healing stopped", Args: []any{"service", r.name, "err", rec.HealError}})
				continue
			}
		}
		p := Place{Kind: Replace, Index: i, Old: id, Spec: ReplicaSpec(r.spec, i, now), Exclude: r.held(o, id), Why: why, noMatch: noMatch}
		if prov != "" && ok && j.Phase == Failed {
			// Lost with its provider (or failed there): the replacement
			// goes elsewhere; one cancelled or ended blames no provider.
			p.Avoid = []string{prov}
		}
		*acts = append(*acts, p)
		if noMatch || rec.Unready > 0 {
			// Its back-off starts once it is bought (Placed): the other
			// ended replicas wait for it.
			break
		}
	}
	return changed
}

// endedWhy says why a replica's job ended.
func endedWhy(j Job) string {
	why := "its job ended " + j.State
	if j.Error != "" {
		why += ": " + j.Error
	}
	return why
}

// renew places a successor for each replica that is due (renewDue).
func (r *Reconciler) renew(now time.Time, o Observed, acts *[]Action) {
	rec := &r.rec
	if rec.HealError != "" {
		return
	}
	seen := map[string]bool{} // the current leases' CIDs, to prune renewTried by
	for i, id := range rec.Replicas {
		j, ok := o.Jobs[id]
		if !ok {
			continue
		}
		l := replicaLease{Running: j.Phase == Running, EverReady: r.everReady[id], Renewing: rec.Renewing[id] != ""}
		if j.Lease.CID != "" {
			seen[j.Lease.CID] = true
			l.Start, l.End = j.Lease.Start, j.Lease.End
			l.Tried = r.renewTried[j.Lease.CID]
		}
		due, why := renewDue(now, l, r.spec.Service.Readiness.InitialDelay)
		if !due {
			continue
		}
		r.renewTried[j.Lease.CID] = true
		*acts = append(*acts, Place{Kind: Renew, Index: i, Old: id, Spec: ReplicaSpec(r.spec, i, now), Exclude: r.held(o, ""), Why: why})
	}
	// A lease no replica holds any more is not looked at again.
	maps.DeleteFunc(r.renewTried, func(cid string, _ bool) bool { return !seen[cid] })
}

// held are the providers the service's live replicas and successors hold,
// by job, but for the job replaced (except): a replica is placed on none.
func (r *Reconciler) held(o Observed, except string) map[string]string {
	out := map[string]string{}
	for _, id := range r.Members() {
		if j, ok := o.Jobs[id]; ok && id != except && !j.Phase.Ended() && j.Provider != "" {
			out[id] = j.Provider
		}
	}
	return out
}

// ExcludedProviders are p.Exclude's providers, sorted, once each.
func (p Place) ExcludedProviders() []string {
	return slices.Compact(slices.Sorted(maps.Values(p.Exclude)))
}
