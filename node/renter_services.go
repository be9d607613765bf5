package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"
	"gopkg.in/yaml.v3"
)

// The renter's services (docs/SERVICES.md, "Running a service"): a
// service is replicas.min jobs of its spec, each an ordinary job record
// (renter_jobs.go) that the batch machinery auctions, starts and follows,
// and a gateway (node/gateway) on 127.0.0.1, or on an address the renter
// chose with a token (service_gateway.go), whose replicas reach the
// jobs' containers through their providers (Node.DialService). The
// definition is kept in the store, so that after a restart the gateway
// comes back on the same address and port, with the same token, and the
// same replica jobs (which the job manager follows again on its own).

// ServiceRecord is the renter's durable view of one service.
type ServiceRecord struct {
	Name     string    `json:"name"`
	Spec     string    `json:"spec"`
	Port     int       `json:"port" doc:"the gateway's port, on host"`
	Host     string    `json:"host,omitempty" doc:"the address the gateway listens on; absent: 127.0.0.1"`
	Replicas []string  `json:"replicas" doc:"the replica jobs' IDs, replica 0 first (the floor's replicas lead)"`
	Created  time.Time `json:"created"`
	// Scale is a count fixed by service_scale (0: the spec's, or the
	// autoscaler's, decides).
	Scale int `json:"scale,omitempty"`
	// Replaced counts the replicas replaced since the service went up;
	// Notes says, by job ID, why each replacement was made.
	Replaced int               `json:"replaced,omitempty"`
	Notes    map[string]string `json:"notes,omitempty"`
	// Unready counts the replicas in a row that ended without ever being
	// ready; at serviceHealLimit healing stops, with HealError saying why.
	Unready   int    `json:"unready,omitempty"`
	HealError string `json:"heal_error,omitempty"`
	// Renewing maps a replica's job to the successor bought to take its
	// index before its lease ends (service_renew.go); Retiring are the
	// jobs a successor took over from, drained and not yet cancelled;
	// Renewed counts the leases renewed since the service went up.
	Renewing map[string]string `json:"renewing,omitempty"`
	Retiring []string          `json:"retiring,omitempty"`
	Renewed  int               `json:"renewed,omitempty"`
	// NotPlaced says why no replica is placed, once every replica index
	// has had an attempt end without a provider running it (no-match, or
	// failed before it ran); cleared when a replica is placed
	// (service_placed.go).
	NotPlaced string `json:"not_placed,omitempty"`
}

// Healing's bounds: after serviceHealLimit replicas in a row that ended
// without ever passing their readiness check, no more are bought (the spec
// is to blame, not the providers); replacements in such a run wait
// serviceSync doubled for each, up to serviceHealBackoff.
const (
	serviceHealLimit   = 4
	serviceHealBackoff = 30 * time.Second
)

// healBackoff is the wait before the next replacement after n in a row
// that never got ready, or that no provider took: step doubled for each,
// up to serviceHealBackoff.
func healBackoff(step time.Duration, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	if n > 16 {
		return serviceHealBackoff // and no shift past the duration's bits
	}
	return min(step<<n, serviceHealBackoff)
}

// serviceSync is how often a service's replica set is matched to its jobs.
const serviceSync = time.Second

type liveService struct {
	gw        *gateway.Gateway
	url       string   // to call it from this machine
	listen    string   // the address it listens on
	lan       []string // its URLs on this machine's other addresses (a wildcard listen address)
	tokenFile string   // the token's file, when calls need one
	probePath string   // the readiness path, for the curl line
	cancel    context.CancelFunc
	done      chan struct{}
	err       string // why the gateway is not up, when gw is nil
}

type services struct {
	n   *Node
	log *slog.Logger

	mu   sync.Mutex // guards recs, live
	recs map[string]*ServiceRecord
	live map[string]*liveService

	// readyGrace: how long past readiness.initial_delay a running replica
	// may go without being ready before it is given up (service_ready.go);
	// settleMax, shorter in tests.
	readyGrace time.Duration
	// healStep: the first wait of healing's back-off (healBackoff);
	// serviceSync, shorter in tests.
	healStep time.Duration
}

func newServices(n *Node, log *slog.Logger) (*services, error) {
	s := &services{n: n, log: log, recs: map[string]*ServiceRecord{}, live: map[string]*liveService{},
		readyGrace: settleMax, healStep: serviceSync}
	err := n.store.ForEach(bucketServices, func(key string, raw []byte) error {
		var rec ServiceRecord
		if err := decodeJSON(raw, &rec); err != nil {
			return fmt.Errorf("service %q: %w", key, err)
		}
		s.recs[rec.Name] = &rec
		return nil
	})
	return s, err
}

// resume brings back the gateway of every service kept in the store, and
// cancels the service jobs that no record holds (service_orphans.go).
func (s *services) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelOrphansLocked()
	for name, rec := range s.recs {
		spec, err := auction.ParseJobSpec([]byte(rec.Spec))
		if err != nil {
			s.live[name] = &liveService{err: err.Error()}
			continue
		}
		if err := s.startLocked(rec, spec, false); err != nil {
			s.log.Warn("service gateway not restarted", "service", name, "host", listenHost(rec), "port", rec.Port, "err", err)
			why := err.Error()
			if le := (*gateway.ListenError)(nil); errors.As(err, &le) {
				why += "; free port " + strconv.Itoa(rec.Port) + " and restart this node, or `gleaner service down " + name + "` and up again"
			}
			s.live[name] = &liveService{err: why}
		}
		// Jobs a successor took over from before the restart, drained
		// then but not yet cancelled: they take no more traffic.
		for _, old := range rec.Retiring {
			go func() {
				s.cancelJobs([]string{old})
				s.forgetRetired(name, old)
			}()
		}
	}
}

// goldStartLead is how far ahead of its purchase a gold replica (of a
// gold floor or a gold service) bought after the spec's start reserves
// its window from: a replacement, a successor or a service brought up
// late needs time for its auction, whose offers reject a reservation
// whose start has passed (auction.ReasonStartPassed).
const goldStartLead = 10 * time.Second

// replicaSpec is the spec of replica i, bought at now: the floor's
// replicas at the floor's tier and price, a gold replica's start moved
// to now + goldStartLead once that is past it, and each replica placed
// by its entry of replica_placement, if it has one, within the spec's
// placement; without the spec's gateway section.
func replicaSpec(spec *auction.JobSpec, i int, now time.Time) ([]byte, error) {
	c := *spec
	svc := *spec.Service
	c.Service = &svc
	if f := spec.Service.Floor; i < f.Replicas {
		// The replica's own spec has the floor's tier and no floor of its
		// own (a floor must be above the spec's tier).
		svc.Floor = auction.Floor{}
		c.Tier = f.Tier
		if f.MaxPrice > 0 {
			c.MaxPrice = f.MaxPrice
		}
	}
	if earliest := now.Add(goldStartLead); c.Tier == auction.Gold && c.Start.Before(earliest) {
		c.Start = earliest.Truncate(time.Second).Add(time.Second).UTC()
	}
	// The entry narrows the placement the replica's auction filters by
	// (the spec's parse has checked it lies within). The replica's spec
	// keeps no entries: the others' would not lie within its placement,
	// and it is one replica.
	svc.ReplicaPlacement = nil
	// Where the renter's gateway listens is the renter's business: no
	// provider sees it, and it is no part of the replicas' hashes.
	svc.Gateway = auction.ServiceGateway{}
	if i < len(spec.Service.ReplicaPlacement) {
		p := spec.Service.ReplicaPlacement[i]
		if len(p.Regions) > 0 {
			c.Placement.Regions = slices.Clone(p.Regions)
		}
		if p.MaxRTT > 0 {
			c.Placement.MaxRTT = p.MaxRTT
		}
	}
	return yaml.Marshal(&c)
}

// up places a service's replicas and starts its gateway on listen
// (host:port; "": the spec's gateway.listen, else 127.0.0.1) with port,
// when not 0, for the port (0: any free one).
func (s *services) up(specYAML []byte, listen string, port int) (*ServiceRecord, string, error) {
	spec, err := auction.ParseJobSpec(specYAML)
	if err != nil {
		return nil, "", err
	}
	if !spec.IsService() {
		return nil, "", fmt.Errorf("%w: kind: the spec is not a service (kind: service); run a batch job with `gleaner job submit`", auction.ErrBadJobSpec)
	}
	if port < 0 || port > 65535 {
		return nil, "", fmt.Errorf("port %d outside 0..65535", port)
	}
	host, port, err := gatewayAddr(spec, listen, port)
	if err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recs[spec.Name]; ok {
		return nil, "", fmt.Errorf("a service %q is already up (see `gleaner service status %s`; `gleaner service down %s` first)", spec.Name, spec.Name, spec.Name)
	}
	rec := &ServiceRecord{Name: spec.Name, Spec: string(specYAML), Port: port, Host: host, Created: time.Now().UTC()}
	// The gateway first: a port taken fails before anything is bought.
	if err := s.startLocked(rec, spec, true); err != nil {
		s.forgetToken(rec.Name)
		return nil, "", err
	}
	ls := s.live[rec.Name]
	for i := range spec.Service.Replicas.Min {
		y, err := replicaSpec(spec, i, time.Now())
		if err == nil {
			var j *JobRecord
			if j, err = s.n.renterJobs.submit(y, nil, SubmitOptions{Service: spec.Name}); err == nil {
				rec.Replicas = append(rec.Replicas, j.ID)
				continue
			}
		}
		s.stopLocked(rec.Name)
		s.forgetToken(rec.Name)
		s.cancelJobs(rec.Replicas)
		return nil, "", fmt.Errorf("replica %d: %w", i, err)
	}
	if err := s.n.store.Update(func(tx *StoreTx) error { return tx.Put(bucketServices, rec.Name, rec) }); err != nil {
		s.stopLocked(rec.Name)
		s.forgetToken(rec.Name)
		s.cancelJobs(rec.Replicas)
		return nil, "", err
	}
	s.recs[rec.Name] = rec
	c := *rec
	return &c, ls.url, nil
}

// startLocked starts rec's gateway and the loop that keeps its replicas;
// fresh (service up, not a restart) makes the gateway's token anew.
func (s *services) startLocked(rec *ServiceRecord, spec *auction.JobSpec, fresh bool) error {
	rd := spec.Service.Readiness
	host := listenHost(rec)
	token, tokenFile, err := s.gatewayToken(rec.Name, host, fresh)
	if err != nil {
		return err
	}
	gw := gateway.New(gateway.Config{Service: rec.Name, ReadyPath: rd.Path, ProbeInterval: rd.Period,
		ProbeTimeout: rd.Timeout, FailThreshold: rd.FailureThreshold, Cost: s.serviceCost(rec),
		Token: token, Hosts: spec.Service.Gateway.Hosts})
	addr, err := gw.Listen(net.JoinHostPort(host, strconv.Itoa(rec.Port)))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(s.n.renterJobs.bg)
	rec.Port = addr.(*net.TCPAddr).Port
	ls := &liveService{gw: gw, url: callURL(host, rec.Port), listen: net.JoinHostPort(host, strconv.Itoa(rec.Port)),
		lan: lanURLs(host, rec.Port), tokenFile: tokenFile, probePath: rd.Path, cancel: cancel, done: make(chan struct{})}
	s.live[rec.Name] = ls
	go func() {
		defer close(ls.done)
		var wg sync.WaitGroup
		wg.Go(func() { gw.RunProbes(ctx) })
		s.keep(ctx, rec.Name, gw)
		wg.Wait()
		_ = gw.Close()
	}()
	return nil
}

// stopLocked has a service's gateway close, and returns a channel closed
// once it has (which must not be waited on under s.mu: the loop takes it).
func (s *services) stopLocked(name string) <-chan struct{} {
	ls := s.live[name]
	delete(s.live, name)
	if ls == nil || ls.gw == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	ls.cancel()
	return ls.done
}

func (s *services) cancelJobs(ids []string) {
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(s.n.renterJobs.bg, 30*time.Second)
		_, err := s.n.renterJobs.cancel(ctx, id)
		// The record is cancelled either way; a provider not reached (one
		// that restarted a moment ago: the dial is in backoff, or one lost
		// mid-pull, which ended the job here while its container may go
		// on) is told again a few times, so that its container does not
		// run on. A job that had already ended here was not told at all:
		// it is told at once. A provider that answers has been told: an
		// error it answers (no active lease: the job ended there too)
		// would be its answer to every try, so it is not asked again.
		for try := 0; err != nil && try < 6 && ctx.Err() == nil; try++ {
			j, gerr := s.n.renterJobs.get(id)
			if gerr != nil || len(j.Lease) == 0 || j.Provider == "" {
				break
			}
			time.Sleep(time.Duration(try) * time.Second)
			var ev wireEvent
			if err = s.n.renterJobs.exchange(ctx, j.Provider, jobProto, wire.JobHead{Kind: "cancel", Lease: j.Lease}, &ev); err == nil && ev.Type == "error" {
				err = errors.New(ev.Error)
				break
			}
		}
		if err != nil {
			s.log.Warn("service replica not cancelled", "job", id, "err", err)
		}
		cancel()
	}
}

// keep matches the gateway's replicas to the service's jobs until ctx
// ends: a job that runs is added (not ready until its readiness probe
// passes), one that moved provider is replaced, one that stopped is
// removed; each replica's RTT is its provider's. Each sync also heals and
// scales the service (sync).
func (s *services) keep(ctx context.Context, name string, gw *gateway.Gateway) {
	added := map[string]string{} // job ID -> provider
	k := &keeper{s: s, name: name, gw: gw, everReady: map[string]bool{}, addedAt: map[string]time.Time{}, gaveUp: map[string]string{},
		renewTried: map[string]bool{}, unplaced: map[int]unplacedEnd{}}
	var lastSync time.Time
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		var ids []string
		if rec := s.recs[name]; rec != nil {
			// A successor is added to the gateway as any replica is: it
			// takes traffic once ready, and its index once the sync sees
			// it ready (service_renew.go).
			ids = append(slices.Clone(rec.Replicas), successors(rec)...)
			if k.spec == nil {
				if spec, err := auction.ParseJobSpec([]byte(rec.Spec)); err == nil && spec.IsService() {
					k.spec, k.as = spec, newAutoscaler(*spec.Service)
				}
			}
		}
		s.mu.Unlock()
		pending := false // a replica whose job is on its way to running
		for _, id := range ids {
			j, err := s.n.renterJobs.get(id)
			live := err == nil && j.State == StateRunning && j.Provider != ""
			if prov, ok := added[id]; ok && (!live || prov != j.Provider) {
				gw.Remove(id)
				delete(added, id)
				delete(k.addedAt, id)
			}
			if !live {
				pending = pending || (err == nil && !terminal(j.State))
				continue
			}
			pid, err := peer.Decode(j.Provider)
			if err != nil {
				continue
			}
			rtt, _ := peerRTT(s.n.market, j.Provider)
			if _, ok := added[id]; ok {
				gw.SetRTT(id, rtt)
				continue
			}
			jobID := id
			gw.Add(gateway.Replica{ID: id, RTT: rtt, Cost: s.replicaCost(jobID), Dial: func(ctx context.Context) (net.Conn, error) {
				return s.n.DialService(ctx, pid, jobID)
			}})
			added[id] = j.Provider
			k.addedAt[id] = time.Now()
			pending = true
			if k.spec != nil {
				go startupProbes(ctx, gw, id, k.spec.Service.Readiness.InitialDelay)
			}
		}
		if now := time.Now(); k.spec != nil && now.Sub(lastSync) >= serviceSync {
			lastSync = now
			drop, retire := k.sync(now)
			for _, id := range drop {
				if _, ok := added[id]; ok {
					gw.Remove(id)
					delete(added, id)
				}
				delete(k.addedAt, id)
				delete(k.gaveUp, id)
			}
			for _, id := range retire {
				delete(added, id)
				delete(k.addedAt, id)
				delete(k.gaveUp, id)
				go s.retire(ctx, name, gw, id)
			}
		}
		// While a replica is on its way the loop looks again soon, so
		// that it is added as soon as its job runs; the sync above keeps
		// its own pace.
		if pending {
			t.Reset(serviceStartupPoll)
		} else {
			t.Reset(serviceSync)
		}
	}
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

// keeper is one service's healing and scaling state, in its loop.
type keeper struct {
	s         *services
	name      string
	gw        *gateway.Gateway
	spec      *auction.JobSpec
	as        *autoscaler
	everReady map[string]bool      // job IDs seen ready
	addedAt   map[string]time.Time // job ID -> when its run was added to the gateway
	gaveUp    map[string]string    // job ID -> why it was cancelled as never ready
	nextHeal  time.Time            // no replacement before (the backoff)
	noMatches int                  // replacements in a row for replicas no provider took
	// renewTried: the leases (CIDs) a successor was bought for, so that
	// one that failed is not bought again and again before the lease ends.
	renewTried map[string]bool
	// leaseSpans: lease CID -> its start and end (leaseSpan), the current
	// leases' only.
	leaseSpans map[string][2]time.Time
	// unplaced: replica index -> its latest attempt that ended without
	// being placed, since a replica last was (placement).
	unplaced map[int]unplacedEnd
}

// target is how many replicas the service should run: the count fixed by
// service_scale, else the autoscaler's (within replicas.min..max), else
// replicas.min; never fewer than the floor.
func (k *keeper) target(rec *ServiceRecord, now time.Time, current int) int {
	svc := k.spec.Service
	n := rec.Scale
	if n <= 0 {
		n = svc.Replicas.Min
		if svc.Autoscale.Enabled() {
			var why string
			n, why = k.as.want(now, withoutSuccessors(k.gw.Stats(), rec), current)
			hi := max(svc.Replicas.Max, svc.Replicas.Min)
			n = min(max(n, svc.Replicas.Min), hi)
			if why != "" && n != current {
				k.s.log.Info("service autoscale", "service", k.name, "from", current, "to", n, "why", why)
			}
		}
	}
	return min(max(n, svc.Floor.Replicas, 1), auction.MaxServiceReplicas)
}

// sync heals and scales the service once: a replica whose job ended is
// replaced by a new job at its index (so a floor replica keeps the
// floor's tier), replicas are added up to the target and the highest
// ones removed down to it; a replica near its lease's end is renewed
// (service_renew.go). It returns the job IDs it dropped, and those to
// drain before their jobs are cancelled (retire: a successor took over).
func (k *keeper) sync(now time.Time) (drop, retire []string) {
	s := k.s
	ready := map[string]bool{}
	for _, r := range k.gw.Stats().Replicas {
		if r.Ready {
			k.everReady[r.ID] = true
			ready[r.ID] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.recs[k.name]
	if rec == nil {
		return nil, nil
	}
	reps := slices.Clone(rec.Replicas)
	notes := maps.Clone(rec.Notes)
	if notes == nil {
		notes = map[string]string{}
	}
	// Successors first: one ready (or whose old job ended) takes its
	// index, so healing below sees it there.
	retire, drop, changed := k.renewSettle(rec, reps, notes, ready)
	// Replicas not ready in time are cancelled first, healing or not:
	// they must not run on unpaid for; the loop below replaces them once
	// their jobs show cancelled.
	cancel := k.giveUpUnready(reps, now)
	// Before the ended replicas are replaced below: what their jobs say
	// of why none is placed.
	if k.placement(rec, reps) {
		changed = true
	}
	for _, id := range reps {
		if k.everReady[id] {
			k.noMatches = 0
			if rec.Unready != 0 {
				rec.Unready, rec.HealError, changed = 0, "", true
			}
		}
	}
	group := s.n.renterJobs.auctionGroup(serviceGroup(k.name))
	for i, id := range reps {
		j, err := s.n.renterJobs.get(id)
		if err == nil && !terminal(j.State) {
			continue
		}
		if rec.HealError != "" || now.Before(k.nextHeal) {
			continue
		}
		why, prov := "its job is gone", ""
		if err == nil {
			why, prov = "its job ended "+j.State, j.Provider
			if j.Error != "" {
				why += ": " + j.Error
			}
		}
		if w, ok := k.gaveUp[id]; ok {
			why = "cancelled: " + w
		}
		// One no provider took never ran: the market's doing, not the
		// spec's, so it is replaced but not counted, and a service whose
		// supply is gone for a while heals once it is back instead of
		// stopping with an error that blames its readiness check.
		noMatch := err == nil && j.State == StateNoMatch
		if !noMatch && !k.everReady[id] {
			rec.Unready++
			changed = true
			if rec.Unready >= serviceHealLimit {
				rec.HealError = fmt.Sprintf("%d replicas in a row ended without passing their readiness check (the last: %s); no more are bought: fix the spec and `gleaner service down %s`, then up again", rec.Unready, why, k.name)
				s.log.Warn("service healing stopped", "service", k.name, "err", rec.HealError)
				continue
			}
		}
		opt := SubmitOptions{Service: k.name}
		if prov != "" && err == nil && j.State == StateFailed {
			// Lost with its provider (or failed there): the replacement
			// goes elsewhere; one cancelled or ended blames no provider.
			opt.Avoid = []string{prov}
		}
		y, yerr := replicaSpec(k.spec, i, now)
		var nj *JobRecord
		if yerr == nil {
			nj, yerr = s.n.renterJobs.submit(y, nil, opt)
		}
		if yerr != nil {
			s.log.Warn("service replica not replaced", "service", k.name, "index", i, "job", id, "err", yerr)
			k.nextHeal = now.Add(serviceHealBackoff)
			continue
		}
		note := fmt.Sprintf("replaces %s (replica %d): %s", id, i, why)
		s.log.Info("service replica replaced", "service", k.name, "index", i, "old", id, "new", nj.ID, "why", why)
		group.Release(id)
		delete(notes, id)
		notes[nj.ID] = note
		reps[i] = nj.ID
		drop = append(drop, id)
		rec.Replaced++
		changed = true
		if noMatch {
			k.noMatches++
			k.nextHeal = now.Add(healBackoff(s.healStep, k.noMatches))
		} else if rec.Unready > 0 {
			k.nextHeal = now.Add(healBackoff(s.healStep, rec.Unready))
		}
	}
	want := k.target(rec, now, len(reps))
	for len(reps) < want && rec.HealError == "" {
		i := len(reps)
		y, err := replicaSpec(k.spec, i, now)
		var nj *JobRecord
		if err == nil {
			nj, err = s.n.renterJobs.submit(y, nil, SubmitOptions{Service: k.name})
		}
		if err != nil {
			s.log.Warn("service replica not added", "service", k.name, "index", i, "err", err)
			break
		}
		s.log.Info("service replica added", "service", k.name, "index", i, "job", nj.ID, "target", want)
		reps = append(reps, nj.ID)
		changed = true
	}
	for len(reps) > want {
		id := reps[len(reps)-1]
		reps = reps[:len(reps)-1]
		s.log.Info("service replica removed", "service", k.name, "index", len(reps), "job", id, "target", want)
		group.Release(id)
		delete(notes, id)
		cancel = append(cancel, id)
		drop = append(drop, id)
		if succ := rec.Renewing[id]; succ != "" {
			// Its successor goes with it.
			delete(rec.Renewing, id)
			group.Release(succ)
			cancel = append(cancel, succ)
			drop = append(drop, succ)
		}
		changed = true
	}
	if k.renewStart(rec, reps, now) {
		changed = true
	}
	if changed {
		rec.Replicas, rec.Notes = reps, notes
		if len(notes) == 0 {
			rec.Notes = nil
		}
		if len(rec.Renewing) == 0 {
			rec.Renewing = nil
		}
		c := *rec
		if err := s.n.store.Update(func(tx *StoreTx) error { return tx.Put(bucketServices, c.Name, &c) }); err != nil {
			s.log.Error("service record not saved", "service", k.name, "err", err)
		}
	}
	if len(cancel) > 0 {
		go s.cancelJobs(cancel)
	}
	return drop, retire
}

// scale fixes the service's replica count at n (1..MaxServiceReplicas),
// or with 0 gives it back to the spec and its autoscaler; the loop adds
// or removes replicas at its next sync.
func (s *services) scale(name string, n int) error {
	if n < 0 || n > auction.MaxServiceReplicas {
		return fmt.Errorf("replicas %d outside 0..%d (0: back to the spec's count or its autoscaler)", n, auction.MaxServiceReplicas)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.recs[name]
	if !ok {
		return fmt.Errorf("no service %q (see `gleaner service ls`)", name)
	}
	spec, err := auction.ParseJobSpec([]byte(rec.Spec))
	if err != nil {
		return err
	}
	if f := spec.Service.Floor.Replicas; n > 0 && n < f {
		return fmt.Errorf("replicas %d is below the spec's floor of %d replicas", n, f)
	}
	prev := rec.Scale
	rec.Scale = n
	c := *rec
	if err := s.n.store.Update(func(tx *StoreTx) error { return tx.Put(bucketServices, c.Name, &c) }); err != nil {
		rec.Scale = prev
		return err
	}
	s.log.Info("service scale", "service", name, "replicas", n)
	return nil
}

// down cancels every replica job and closes the gateway.
func (s *services) down(name string) (*ServiceRecord, error) {
	rec, err := s.forget(name)
	if rec == nil {
		return nil, err
	}
	// The successors and the jobs being retired go too.
	s.cancelJobs(append(append(slices.Clone(rec.Replicas), successors(rec)...), rec.Retiring...))
	return rec, err
}

// forget closes a service's gateway, stops its loop and deletes its
// record and token, and returns a copy of the record (nil when there is
// no such service); its jobs are the caller's to cancel.
func (s *services) forget(name string) (*ServiceRecord, error) {
	s.mu.Lock()
	rec, ok := s.recs[name]
	if !ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("no service %q (see `gleaner service ls`)", name)
	}
	done := s.stopLocked(name)
	delete(s.recs, name)
	err := s.n.store.Update(func(tx *StoreTx) error { return tx.Delete(bucketServices, name) })
	s.mu.Unlock()
	<-done
	s.forgetToken(name)
	c := *rec
	return &c, err
}

// close stops every gateway (the node stops; the records stay).
func (s *services) close() {
	s.mu.Lock()
	var dones []<-chan struct{}
	for name := range s.live {
		dones = append(dones, s.stopLocked(name))
	}
	s.mu.Unlock()
	for _, d := range dones {
		<-d
	}
}

// ServiceReplica is one replica's job and readiness.
type ServiceReplica struct {
	Index    int    `json:"index"`
	Job      string `json:"job"`
	State    string `json:"state"`
	Provider string `json:"provider,omitempty"`
	Ready    bool   `json:"ready"`
	Error    string `json:"error,omitempty" doc:"the replica job's error: why it ended, or while it is auctioned again why the last round found no match"`
	Note     string `json:"note,omitempty" doc:"why this replica replaced or renewed another, when it did"`
	Renewing string `json:"renewing,omitempty" doc:"the successor job bought to take this replica's index before its lease ends; absent when none"`
}

// ServiceView is a service as service_up, service_list and service_status
// show it.
type ServiceView struct {
	Name     string           `json:"name"`
	URL      string           `json:"url,omitempty" doc:"the gateway's address; empty while it is down"`
	Gateway  string           `json:"gateway" doc:"up, or down with why in gateway_error"`
	Error    string           `json:"gateway_error,omitempty"`
	Port     int              `json:"port"`
	Listen   string           `json:"listen,omitempty" doc:"the address the gateway listens on (0.0.0.0 or [::]: every interface); absent while it is down"`
	LAN      []string         `json:"lan_urls,omitempty" doc:"the gateway's URLs on this machine's other addresses, for other machines, when it listens on every interface"`
	Token    string           `json:"token_file,omitempty" doc:"the file holding the bearer token every call needs (the gateway listens beyond loopback); absent: none is needed"`
	Curl     string           `json:"curl,omitempty" doc:"a command that calls the readiness path through the gateway, with the token when one is needed"`
	Created  time.Time        `json:"created"`
	Replicas []ServiceReplica `json:"replicas"`
	Stats    *gateway.Stats   `json:"stats,omitempty" doc:"the gateway's figures (service_status only)"`
	Scale    int              `json:"scale,omitempty" doc:"the replica count fixed by service_scale; absent: the spec's, or its autoscaler's"`
	Replaced int              `json:"replaced,omitempty" doc:"replicas replaced since the service went up"`
	Heal     string           `json:"heal_error,omitempty" doc:"why no more replicas are bought, when healing stopped"`
	Renewed  int              `json:"renewed,omitempty" doc:"replica leases renewed (a successor took over before the lease's end) since the service went up"`
	// NotPlaced and Up: docs/SERVICES.md, "When no replica can be placed".
	NotPlaced string            `json:"not_placed,omitempty" doc:"while no replica is placed (none runs on a provider): why, from the latest replica attempt (its state, its error and, for a no-match, the providers' reasons); absent while a replica is placed or the replicas are simply on their way"`
	Up        *ServiceUpOutcome `json:"up,omitempty" doc:"service_up with wait_s only: whether a replica was placed, why not, and whether the service was kept"`
}

func (s *services) view(name string, stats bool) (*ServiceView, error) {
	s.mu.Lock()
	r, ok := s.recs[name]
	var rec ServiceRecord
	if ok {
		rec = *r
		rec.Notes = maps.Clone(r.Notes)
		rec.Renewing = maps.Clone(r.Renewing)
	}
	ls := s.live[name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no service %q (see `gleaner service ls`)", name)
	}
	v := &ServiceView{Name: rec.Name, Port: rec.Port, Created: rec.Created, Gateway: "down", Replicas: []ServiceReplica{},
		Scale: rec.Scale, Replaced: rec.Replaced, Heal: rec.HealError, Renewed: rec.Renewed}
	ready := map[string]bool{}
	switch {
	case ls != nil && ls.gw != nil:
		v.URL, v.Gateway, v.Listen, v.LAN, v.Token = ls.url, "up", ls.listen, ls.lan, ls.tokenFile
		v.Curl = curlLine(ls.url, ls.probePath, ls.tokenFile)
		st := ls.gw.Stats()
		for _, r := range st.Replicas {
			ready[r.ID] = r.Ready
		}
		if stats {
			v.Stats = &st
		}
	case ls != nil:
		v.Error = ls.err
	default:
		v.Error = "not started"
	}
	placed := false
	jobs := make([]*JobRecord, len(rec.Replicas))
	for i, id := range rec.Replicas {
		r := ServiceReplica{Index: i, Job: id, Ready: ready[id], Note: rec.Notes[id], Renewing: rec.Renewing[id]}
		if j, err := s.n.renterJobs.get(id); err == nil {
			r.State, r.Provider, r.Error = j.State, j.Provider, j.Error
			jobs[i] = j
			placed = placed || placedState(j.State)
		}
		v.Replicas = append(v.Replicas, r)
	}
	if !placed {
		v.NotPlaced = notPlacedView(&rec, jobs)
	}
	return v, nil
}

func (s *services) list() []ServiceView {
	s.mu.Lock()
	names := make([]string, 0, len(s.recs))
	for name := range s.recs {
		names = append(names, name)
	}
	s.mu.Unlock()
	sort.Strings(names)
	out := []ServiceView{}
	for _, name := range names {
		if v, err := s.view(name, false); err == nil {
			out = append(out, *v)
		}
	}
	return out
}
