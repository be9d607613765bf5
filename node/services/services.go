// Package services is the renter's services (docs/SERVICES.md, "Running
// a service"): a service is replicas.min jobs of its spec, each an
// ordinary job record (node/renting) that the batch machinery auctions,
// starts and follows, and a gateway (node/gateway) on 127.0.0.1, or on an
// address the renter chose with a token (gateway.go), whose replicas
// reach the jobs' containers through their providers (Dial, which the
// node serves as Node.DialService). The
// definition is kept in the store, so that after a restart the gateway
// comes back on the same address and port, with the same token, and the
// same replica jobs (which the job manager follows again on its own).
//
// What the replicas should be (how many, which to replace, when to renew,
// which to give up) is decided by the service's reconciler
// (auction/service), which does no I/O; the keeper here observes the
// jobs and the gateway, Ticks it and carries out its actions.
//
// The node wires it (node/node_jobs.go) and registers its RPC namespace
// (api.go).
package services

import (
	"context"
	"encoding/json"
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
	"github.com/gleaner-net/gleaner/auction/service"
	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
	"gopkg.in/yaml.v3"
)

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
	// index before its lease ends (renew.go); Retiring are the
	// jobs a successor took over from, drained and not yet cancelled;
	// Renewed counts the leases renewed since the service went up.
	Renewing map[string]string `json:"renewing,omitempty"`
	Retiring []string          `json:"retiring,omitempty"`
	Renewed  int               `json:"renewed,omitempty"`
	// NotPlaced says why no replica is placed, once every replica index
	// has had an attempt end without a provider running it (no-match, or
	// failed before it ran); cleared when a replica is placed
	// (placed.go).
	NotPlaced string `json:"not_placed,omitempty"`
}

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

// Manager keeps the renter's services: their records, gateways and
// keepers.
type Manager struct {
	bg     context.Context // the node's background context: the keepers' and cancels' parent
	store  *store.Store
	jobs   *renting.Jobs  // buys, follows and cancels the replicas' jobs
	market *offers.Market // its host dials the replicas; its book says their RTT
	repo   *repo.Repo     // keeps the gateways' tokens
	log    *slog.Logger

	mu   sync.Mutex // guards recs, live
	recs map[string]*ServiceRecord
	live map[string]*liveService
	// saveMu orders the writes of the records to the store, which happen
	// outside mu (save); taken before mu, never under it.
	saveMu sync.Mutex

	// readyGrace: how long past readiness.initial_delay a running replica
	// may go without being ready before it is given up
	// (service.Config.ReadyGrace); service.SettleMax, shorter in tests.
	readyGrace time.Duration
	// healStep: the first wait of healing's back-off (service.HealBackoff);
	// service.SyncEvery, shorter in tests.
	healStep time.Duration
}

// Deps is everything the renter's services work with.
type Deps struct {
	Bg     context.Context
	Store  *store.Store
	Jobs   *renting.Jobs
	Market *offers.Market
	Repo   *repo.Repo
	Log    *slog.Logger
}

// New loads the services of the last run from d.Store; Resume brings
// their gateways back.
func New(d Deps) (*Manager, error) {
	s := &Manager{bg: d.Bg, store: d.Store, jobs: d.Jobs, market: d.Market, repo: d.Repo, log: d.Log,
		recs: map[string]*ServiceRecord{}, live: map[string]*liveService{},
		readyGrace: service.SettleMax, healStep: service.SyncEvery}
	err := d.Store.ForEach(store.BucketServices, func(key string, raw []byte) error {
		var rec ServiceRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fmt.Errorf("service %q: %w", key, err)
		}
		s.recs[rec.Name] = &rec
		return nil
	})
	return s, err
}

// Resume brings back the gateway of every service kept in the store, and
// cancels the service jobs that no record holds (orphans.go).
func (s *Manager) Resume() {
	live := s.jobs.LiveServiceJobs() // nothing buys before resume
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelOrphansLocked(live)
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

// replicaSpec is the spec of replica i, bought at now
// (service.ReplicaSpec), as YAML to submit.
func replicaSpec(spec *auction.JobSpec, i int, now time.Time) ([]byte, error) {
	return yaml.Marshal(service.ReplicaSpec(spec, i, now))
}

// up places a service's replicas and starts its gateway on listen
// (host:port; "": the spec's gateway.listen, else 127.0.0.1) with port,
// when not 0, for the port (0: any free one).
func (s *Manager) up(specYAML []byte, listen string, port int) (*ServiceRecord, string, error) {
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
	// A name with a gateway but no record yet is being brought up.
	_, up := s.recs[spec.Name]
	if _, starting := s.live[spec.Name]; up || starting {
		s.mu.Unlock()
		return nil, "", fmt.Errorf("a service %q is already up (see `gleaner service status %s`; `gleaner service down %s` first)", spec.Name, spec.Name, spec.Name)
	}
	rec := &ServiceRecord{Name: spec.Name, Spec: string(specYAML), Port: port, Host: host, Created: time.Now().UTC()}
	// The gateway first: a port taken fails before anything is bought.
	// Its keeper waits for the record, which is no one's but this
	// call's until it is in s.recs: the replicas are bought and the
	// record written outside s.mu.
	if err := s.startLocked(rec, spec, true); err != nil {
		s.mu.Unlock()
		s.forgetToken(rec.Name)
		return nil, "", err
	}
	ls := s.live[rec.Name]
	s.mu.Unlock()
	undo := func() {
		s.mu.Lock()
		done := s.stopLocked(rec.Name)
		s.mu.Unlock()
		<-done
		s.forgetToken(rec.Name)
		s.cancelJobs(rec.Replicas)
	}
	for i := range spec.Service.Replicas.Min {
		y, err := replicaSpec(spec, i, time.Now())
		if err == nil {
			var j *renting.JobRecord
			if j, err = s.jobs.Submit(y, nil, renting.SubmitOptions{Service: spec.Name}); err == nil {
				rec.Replicas = append(rec.Replicas, j.ID)
				continue
			}
		}
		undo()
		return nil, "", fmt.Errorf("replica %d: %w", i, err)
	}
	if err := s.store.Update(func(tx *store.Tx) error { return tx.Put(store.BucketServices, rec.Name, rec) }); err != nil {
		undo()
		return nil, "", err
	}
	s.mu.Lock()
	s.recs[rec.Name] = rec
	c := *rec
	s.mu.Unlock()
	return &c, ls.url, nil
}

// startLocked starts rec's gateway and the loop that keeps its replicas;
// fresh (service up, not a restart) makes the gateway's token anew.
func (s *Manager) startLocked(rec *ServiceRecord, spec *auction.JobSpec, fresh bool) error {
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
	ctx, cancel := context.WithCancel(s.bg)
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
func (s *Manager) stopLocked(name string) <-chan struct{} {
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

// cancelJobs cancels the jobs ids: their records, and their providers,
// told again a few times when they were not reached.
func (s *Manager) cancelJobs(ids []string) {
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(s.bg, 30*time.Second)
		_, err := s.jobs.Cancel(ctx, id)
		// The record is cancelled either way; a provider not reached (one
		// that restarted a moment ago: the dial is in backoff, or one lost
		// mid-pull, which ended the job here while its container may go
		// on) is told again a few times, so that its container does not
		// run on. A job that had already ended here was not told at all:
		// it is told at once. A provider that answers has been told: an
		// error it answers (no active lease: the job ended there too)
		// would be its answer to every try, so it is not asked again.
		for try := 0; err != nil && try < 6 && ctx.Err() == nil; try++ {
			j, gerr := s.jobs.Get(id)
			if gerr != nil || len(j.Lease) == 0 || j.Provider == "" {
				break
			}
			time.Sleep(time.Duration(try) * time.Second)
			var ev wire.Event
			if err = s.jobs.Exchange(ctx, j.Provider, wire.JobProto, wire.JobHead{Kind: "cancel", Lease: j.Lease}, &ev); err == nil && ev.Type == "error" {
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

// scale fixes the service's replica count at n (1..MaxServiceReplicas),
// or with 0 gives it back to the spec and its autoscaler; the loop adds
// or removes replicas at its next sync.
func (s *Manager) scale(name string, n int) error {
	if n < 0 || n > auction.MaxServiceReplicas {
		return fmt.Errorf("replicas %d outside 0..%d (0: back to the spec's count or its autoscaler)", n, auction.MaxServiceReplicas)
	}
	s.mu.Lock()
	rec, ok := s.recs[name]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("no service %q (see `gleaner service ls`)", name)
	}
	spec, err := auction.ParseJobSpec([]byte(rec.Spec))
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if f := spec.Service.Floor.Replicas; n > 0 && n < f {
		s.mu.Unlock()
		return fmt.Errorf("replicas %d is below the spec's floor of %d replicas", n, f)
	}
	prev := rec.Scale
	rec.Scale = n
	s.mu.Unlock()
	if err := s.save(name); err != nil {
		s.mu.Lock()
		if rec.Scale == n {
			rec.Scale = prev
		}
		s.mu.Unlock()
		return err
	}
	s.log.Info("service scale", "service", name, "replicas", n)
	return nil
}

// down cancels every replica job and closes the gateway.
func (s *Manager) down(name string) (*ServiceRecord, error) {
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
func (s *Manager) forget(name string) (*ServiceRecord, error) {
	// saveMu first: a save of the record in flight lands before the
	// delete, and none after it.
	s.saveMu.Lock()
	s.mu.Lock()
	rec, ok := s.recs[name]
	if !ok {
		s.mu.Unlock()
		s.saveMu.Unlock()
		return nil, fmt.Errorf("no service %q (see `gleaner service ls`)", name)
	}
	done := s.stopLocked(name)
	delete(s.recs, name)
	s.mu.Unlock()
	err := s.store.Update(func(tx *store.Tx) error { return tx.Delete(store.BucketServices, name) })
	s.saveMu.Unlock()
	<-done
	s.forgetToken(name)
	c := *rec
	return &c, err
}

// Close stops every gateway (the node stops; the records stay).
func (s *Manager) Close() {
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

func (s *Manager) View(name string, stats bool) (*ServiceView, error) {
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
	jobs := make([]*renting.JobRecord, len(rec.Replicas))
	for i, id := range rec.Replicas {
		r := ServiceReplica{Index: i, Job: id, Ready: ready[id], Note: rec.Notes[id], Renewing: rec.Renewing[id]}
		if j, err := s.jobs.Get(id); err == nil {
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

func (s *Manager) list() []ServiceView {
	s.mu.Lock()
	names := make([]string, 0, len(s.recs))
	for name := range s.recs {
		names = append(names, name)
	}
	s.mu.Unlock()
	sort.Strings(names)
	out := []ServiceView{}
	for _, name := range names {
		if v, err := s.View(name, false); err == nil {
			out = append(out, *v)
		}
	}
	return out
}
