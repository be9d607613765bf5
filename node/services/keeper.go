package services

import (
	"context"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/service"
	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
	"gopkg.in/yaml.v3"
)

// The keeper is a service's loop on the renter: it matches the gateway's
// replicas to the service's jobs, and once per service.SyncEvery it observes
// the jobs and the gateway, Ticks the service's reconciler
// (auction/service, where every decision lives) and carries out what it
// returns: jobs bought, released, cancelled, drained, the record saved.
// It takes services.mu only to read and mirror the record; the store
// writes, the auctions and the cancels happen outside it.

// keeper is one service's loop state.
type keeper struct {
	s    *Manager
	name string
	gw   *gateway.Gateway
	spec *auction.JobSpec
	r    *service.Reconciler // nil until the record is readable

	added   map[string]string    // job ID -> provider, the replicas in the gateway
	addedAt map[string]time.Time // job ID -> when its run was added to the gateway
	// leaseSpans: lease CID -> its start and end (leaseSpan), the current
	// leases' only.
	leaseSpans map[string][2]time.Time
}

// keep matches the gateway's replicas to the service's jobs until ctx
// ends: a job that runs is added (not ready until its readiness probe
// passes), one that moved provider is replaced, one that stopped is
// removed; each replica's RTT is its provider's. Each sync also has the
// reconciler heal, scale and renew the service (sync).
func (s *Manager) keep(ctx context.Context, name string, gw *gateway.Gateway) {
	k := &keeper{s: s, name: name, gw: gw, added: map[string]string{}, addedAt: map[string]time.Time{}}
	var lastSync time.Time
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if k.r == nil {
			k.start()
		}
		pending := k.follow(ctx)
		if now := time.Now(); k.r != nil && now.Sub(lastSync) >= service.SyncEvery {
			lastSync = now
			k.sync(ctx, now)
		}
		// While a replica is on its way the loop looks again soon, so
		// that it is added as soon as its job runs; the sync above keeps
		// its own pace.
		if pending {
			t.Reset(serviceStartupPoll)
		} else {
			t.Reset(service.SyncEvery)
		}
	}
}

// start makes the service's reconciler from its record, once the record
// is there (service up stores it once its replicas are bought).
func (k *keeper) start() {
	s := k.s
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.recs[k.name]
	if rec == nil {
		return
	}
	spec, err := auction.ParseJobSpec([]byte(rec.Spec))
	if err != nil || !spec.IsService() {
		return
	}
	k.spec = spec
	k.r = service.New(k.name, spec, rec.decisions(), service.Config{ReadyGrace: s.readyGrace, HealStep: s.healStep})
}

// follow adds to the gateway the replicas (and successors: one takes
// traffic once ready, and its index once the reconciler sees it ready)
// whose jobs run, and removes those whose jobs stopped or moved. It
// reports whether one is on its way to running.
func (k *keeper) follow(ctx context.Context) (pending bool) {
	if k.r == nil {
		return false
	}
	s, gw := k.s, k.gw
	for _, id := range k.r.Members() {
		j, err := s.jobs.Get(id)
		live := err == nil && j.State == renting.StateRunning && j.Provider != ""
		if prov, ok := k.added[id]; ok && (!live || prov != j.Provider) {
			gw.Remove(id)
			delete(k.added, id)
			delete(k.addedAt, id)
		}
		if !live {
			pending = pending || (err == nil && !renting.Terminal(j.State))
			continue
		}
		pid, err := peer.Decode(j.Provider)
		if err != nil {
			continue
		}
		rtt, _ := renting.PeerRTT(s.market, j.Provider)
		if _, ok := k.added[id]; ok {
			gw.SetRTT(id, rtt)
			continue
		}
		jobID := id
		gw.Add(gateway.Replica{ID: id, RTT: rtt, Cost: s.replicaCost(jobID), Dial: func(ctx context.Context) (net.Conn, error) {
			return Dial(ctx, s.market.Host(), pid, jobID)
		}})
		k.added[id] = j.Provider
		k.addedAt[id] = time.Now()
		pending = true
		go startupProbes(ctx, gw, id, k.spec.Service.Readiness.InitialDelay)
	}
	return pending
}

// A replica on its way: its job is looked at every serviceStartupPoll
// until it runs, and once it runs its readiness path is checked every
// serviceStartupProbe (from readiness.initial_delay on) until it first
// passes, for at most serviceStartupFor; the gateway's own checks, every
// readiness.period, go on beside. A loading model answers 503 a few more
// times; in exchange a replica takes traffic within a fraction of a
// second of being ready, not a period later.
const (
	serviceStartupPoll  = 100 * time.Millisecond
	serviceStartupProbe = 200 * time.Millisecond
	serviceStartupFor   = 10 * time.Minute
)

// startupProbes checks replica id every serviceStartupProbe until it
// passes, leaves the gateway, or serviceStartupFor has passed.
func startupProbes(ctx context.Context, gw *gateway.Gateway, id string, delay time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, delay+serviceStartupFor)
	defer cancel()
	for wait := delay; ; wait = serviceStartupProbe {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if ready, found := gw.ProbeOne(ctx, id); ready || !found {
			return
		}
	}
}

// sync observes the service, Ticks its reconciler and carries out the
// actions.
func (k *keeper) sync(ctx context.Context, now time.Time) {
	s := k.s
	s.mu.Lock()
	rec := s.recs[k.name]
	var scale int
	if rec != nil {
		scale = rec.Scale
	}
	s.mu.Unlock()
	if rec == nil {
		return // taken down
	}
	k.carryOut(ctx, now, k.r.Tick(now, k.observe(scale)))
}

// observe is the reconciler's view of the service now: its jobs (the
// replicas' and successors'), the gateway's readiness and load.
func (k *keeper) observe(scale int) service.Observed {
	st := k.gw.Stats()
	o := service.Observed{Scale: scale, Jobs: map[string]service.Job{}, QPS: st.QPS, Outstanding: st.Outstanding}
	for _, r := range st.Replicas {
		o.Gateway = append(o.Gateway, service.Replica{ID: r.ID, Ready: r.Ready})
	}
	seen := map[string]bool{} // the current leases' CIDs, to prune leaseSpans by
	for _, id := range k.r.Members() {
		j, err := k.s.jobs.Get(id)
		if err != nil {
			continue // gone
		}
		sj := service.Job{Phase: jobPhase(j.State), State: j.State, Provider: j.Provider, Error: j.Error,
			Started: j.StartedAt != nil, Updated: j.Updated, Serving: k.addedAt[id]}
		if endedUnplaced(j) {
			sj.Why = jobWhy(j)
		}
		if span, ok := k.leaseSpan(j); ok {
			seen[j.LeaseCID] = true
			sj.Lease = service.Lease{CID: j.LeaseCID, Start: span[0], End: span[1]}
		}
		o.Jobs[id] = sj
	}
	maps.DeleteFunc(k.leaseSpans, func(cid string, _ [2]time.Time) bool { return !seen[cid] })
	return o
}

// jobPhase is a job state as the reconciler tells them apart.
func jobPhase(state string) service.Phase {
	switch state {
	case renting.StateRunning:
		return service.Running
	case renting.StateReserved, renting.StatePreempting, renting.StatePaused:
		return service.Holding
	case renting.StateNoMatch:
		return service.NoMatch
	case renting.StateFailed:
		return service.Failed
	case renting.StateCompleted, renting.StateCancelled:
		return service.Done
	}
	return service.Pending
}

// carryOut does what the reconciler decided, in its order: a placement
// is a job submitted (its auction runs on its own) and reported back; a
// failed one ends the Tick's placements of its kind. The record is
// mirrored and written once, after; the cancels and drains run on their
// own.
func (k *keeper) carryOut(ctx context.Context, now time.Time, acts []service.Action) {
	s := k.s
	group := s.jobs.ServiceGroup(k.name)
	save := false
	var cancel, retire []string
	stopped := map[service.PlaceKind]bool{}
	for _, a := range acts {
		switch a := a.(type) {
		case service.Log:
			if a.Warn {
				s.log.Warn(a.Msg, a.Args...)
			} else {
				s.log.Info(a.Msg, a.Args...)
			}
		case service.Save:
			save = true
		case service.Release:
			group.Release(a.Job)
		case service.Drop:
			k.drop(a.Job)
		case service.Cancel:
			cancel = append(cancel, a.Job)
		case service.Retire:
			// Out of the keeper's books; the drain takes it out of the
			// gateway.
			delete(k.added, a.Job)
			delete(k.addedAt, a.Job)
			retire = append(retire, a.Job)
		case service.Place:
			if stopped[a.Kind] {
				continue
			}
			id, err := k.place(a)
			if !k.r.Placed(now, a, id, err) {
				stopped[a.Kind] = true
			}
			if err == nil {
				save = true
				if a.Kind == service.Replace {
					group.Release(a.Old)
					k.drop(a.Old)
				}
			}
		}
	}
	if save || len(retire) > 0 {
		d := k.r.Record()
		s.mu.Lock()
		if rec := s.recs[k.name]; rec != nil {
			rec.setDecisions(d)
			rec.Retiring = append(slices.Clone(rec.Retiring), retire...)
		}
		s.mu.Unlock()
		if err := s.save(k.name); err != nil {
			s.log.Error("service record not saved", "service", k.name, "err", err)
		}
	}
	for _, id := range retire {
		go s.retire(ctx, k.name, k.gw, id)
	}
	if len(cancel) > 0 {
		go s.cancelJobs(cancel)
	}
}

// place submits p's replica job; the service's auction group keeps it off
// the providers its siblings hold (p.Exclude, kept current while the
// auction runs).
func (k *keeper) place(p service.Place) (string, error) {
	s := k.s
	y, err := yaml.Marshal(p.Spec)
	var j *renting.JobRecord
	if err == nil {
		j, err = s.jobs.Submit(y, nil, renting.SubmitOptions{Service: k.name, Avoid: p.Avoid})
	}
	switch {
	case err != nil && p.Kind == service.Replace:
		s.log.Warn("service replica not replaced", "service", k.name, "index", p.Index, "job", p.Old, "err", err)
	case err != nil && p.Kind == service.Add:
		s.log.Warn("service replica not added", "service", k.name, "index", p.Index, "err", err)
	case err != nil:
		s.log.Warn("service renewal not bought: the replica serves to its lease's end, then is healed", "service", k.name, "index", p.Index, "job", p.Old, "err", err)
	case p.Kind == service.Replace:
		s.log.Info("service replica replaced", "service", k.name, "index", p.Index, "old", p.Old, "new", j.ID, "why", p.Why)
	case p.Kind == service.Add:
		s.log.Info("service replica added", "service", k.name, "index", p.Index, "job", j.ID, "why", p.Why)
	default:
		s.log.Info("service replica renewing", "service", k.name, "index", p.Index, "job", p.Old, "successor", j.ID, "why", p.Why)
	}
	if err != nil {
		return "", err
	}
	return j.ID, nil
}

// drop takes job id out of the gateway and the keeper's books.
func (k *keeper) drop(id string) {
	if _, ok := k.added[id]; ok {
		k.gw.Remove(id)
		delete(k.added, id)
	}
	delete(k.addedAt, id)
}

// leaseSpan is the start and end of j's current lease, decoded once per
// lease (by its CID) rather than on every sync; false when it has none
// readable.
func (k *keeper) leaseSpan(j *renting.JobRecord) ([2]time.Time, bool) {
	if j.LeaseCID == "" {
		return [2]time.Time{}, false
	}
	if span, ok := k.leaseSpans[j.LeaseCID]; ok {
		return span, true
	}
	l := jobLease(j)
	if l == nil {
		return [2]time.Time{}, false
	}
	if k.leaseSpans == nil {
		k.leaseSpans = map[string][2]time.Time{}
	}
	span := [2]time.Time{time.Unix(l.Start, 0), time.Unix(l.End, 0)}
	k.leaseSpans[j.LeaseCID] = span
	return span, true
}

// decisions is the part of rec the reconciler owns.
func (rec *ServiceRecord) decisions() service.Record {
	return service.Record{Replicas: slices.Clone(rec.Replicas), Notes: maps.Clone(rec.Notes), Replaced: rec.Replaced, Renewed: rec.Renewed,
		Unready: rec.Unready, HealError: rec.HealError, Renewing: maps.Clone(rec.Renewing), NotPlaced: rec.NotPlaced}
}

// setDecisions sets the part of rec the reconciler owns to d.
func (rec *ServiceRecord) setDecisions(d service.Record) {
	rec.Replicas, rec.Notes, rec.Replaced, rec.Renewed = d.Replicas, d.Notes, d.Replaced, d.Renewed
	rec.Unready, rec.HealError, rec.Renewing, rec.NotPlaced = d.Unready, d.HealError, d.Renewing, d.NotPlaced
}

// save writes service name's record as it is now (nothing when it is
// gone). saveMu orders the writes, each of the latest record, so that an
// older one never lands after a newer one, and keeps the store's write
// out of s.mu.
func (s *Manager) save(name string) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	rec := s.recs[name]
	var c ServiceRecord
	if rec != nil {
		c = *rec
		c.Replicas, c.Retiring = slices.Clone(rec.Replicas), slices.Clone(rec.Retiring)
		c.Notes, c.Renewing = maps.Clone(rec.Notes), maps.Clone(rec.Renewing)
	}
	s.mu.Unlock()
	if rec == nil {
		return nil
	}
	return s.store.Update(func(tx *store.Tx) error { return tx.Put(store.BucketServices, c.Name, &c) })
}
