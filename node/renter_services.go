package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/libp2p/go-libp2p/core/peer"
	"gopkg.in/yaml.v3"
)

// The renter's services (docs/SERVICES.md, "Running a service"): a
// service is replicas.min jobs of its spec, each an ordinary job record
// (renter_jobs.go) that the batch machinery auctions, starts and follows,
// and a gateway (node/gateway) on 127.0.0.1 whose replicas reach the
// jobs' containers through their providers (Node.DialService). The
// definition is kept in the store, so that after a restart the gateway
// comes back on the same port with the same replica jobs (which the job
// manager follows again on its own).

// ServiceRecord is the renter's durable view of one service.
type ServiceRecord struct {
	Name     string    `json:"name"`
	Spec     string    `json:"spec"`
	Port     int       `json:"port" doc:"the gateway's port on 127.0.0.1"`
	Replicas []string  `json:"replicas" doc:"the replica jobs' IDs, replica 0 first (the floor's replicas lead)"`
	Created  time.Time `json:"created"`
}

// serviceSync is how often a service's replica set is matched to its jobs.
const serviceSync = time.Second

type liveService struct {
	gw     *gateway.Gateway
	url    string
	cancel context.CancelFunc
	done   chan struct{}
	err    string // why the gateway is not up, when gw is nil
}

type services struct {
	n   *Node
	log *slog.Logger

	mu   sync.Mutex // guards recs, live
	recs map[string]*ServiceRecord
	live map[string]*liveService
}

func newServices(n *Node, log *slog.Logger) (*services, error) {
	s := &services{n: n, log: log, recs: map[string]*ServiceRecord{}, live: map[string]*liveService{}}
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

// resume brings back the gateway of every service kept in the store.
func (s *services) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, rec := range s.recs {
		spec, err := auction.ParseJobSpec([]byte(rec.Spec))
		if err != nil {
			s.live[name] = &liveService{err: err.Error()}
			continue
		}
		if err := s.startLocked(rec, spec); err != nil {
			s.log.Warn("service gateway not restarted", "service", name, "port", rec.Port, "err", err)
			s.live[name] = &liveService{err: err.Error()}
		}
	}
}

// replicaSpec is the spec of replica i: the floor's replicas at the
// floor's tier and price.
func replicaSpec(spec *auction.JobSpec, i int) ([]byte, error) {
	c := *spec
	if f := spec.Service.Floor; i < f.Replicas {
		// The replica's own spec has the floor's tier and no floor of its
		// own (a floor must be above the spec's tier).
		svc := *spec.Service
		svc.Floor = auction.Floor{}
		c.Service, c.Tier = &svc, f.Tier
		if f.MaxPrice > 0 {
			c.MaxPrice = f.MaxPrice
		}
	}
	return yaml.Marshal(&c)
}

// up places a service's replicas and starts its gateway on port (0: any).
func (s *services) up(specYAML []byte, port int) (*ServiceRecord, string, error) {
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recs[spec.Name]; ok {
		return nil, "", fmt.Errorf("a service %q is already up (see `gleaner service status %s`; `gleaner service down %s` first)", spec.Name, spec.Name, spec.Name)
	}
	rec := &ServiceRecord{Name: spec.Name, Spec: string(specYAML), Port: port, Created: time.Now().UTC()}
	// The gateway first: a port taken fails before anything is bought.
	if err := s.startLocked(rec, spec); err != nil {
		return nil, "", err
	}
	ls := s.live[rec.Name]
	for i := range spec.Service.Replicas.Min {
		y, err := replicaSpec(spec, i)
		if err == nil {
			var j *JobRecord
			if j, err = s.n.renterJobs.submit(y, nil, SubmitOptions{}); err == nil {
				rec.Replicas = append(rec.Replicas, j.ID)
				continue
			}
		}
		s.stopLocked(rec.Name)
		s.cancelJobs(rec.Replicas)
		return nil, "", fmt.Errorf("replica %d: %w", i, err)
	}
	if err := s.n.store.Update(func(tx *StoreTx) error { return tx.Put(bucketServices, rec.Name, rec) }); err != nil {
		s.stopLocked(rec.Name)
		s.cancelJobs(rec.Replicas)
		return nil, "", err
	}
	s.recs[rec.Name] = rec
	c := *rec
	return &c, ls.url, nil
}

// startLocked starts rec's gateway and the loop that keeps its replicas.
func (s *services) startLocked(rec *ServiceRecord, spec *auction.JobSpec) error {
	rd := spec.Service.Readiness
	gw := gateway.New(gateway.Config{Service: rec.Name, ReadyPath: rd.Path, ProbeInterval: rd.Period,
		ProbeTimeout: rd.Timeout, FailThreshold: rd.FailureThreshold})
	addr, err := gw.Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(rec.Port)))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(s.n.renterJobs.bg)
	ls := &liveService{gw: gw, url: "http://" + addr.String(), cancel: cancel, done: make(chan struct{})}
	s.live[rec.Name] = ls
	rec.Port = addr.(*net.TCPAddr).Port
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
		// that restarted a moment ago: the dial is in backoff) is told
		// again a few times, so that its container does not run on.
		for try := 0; err != nil && try < 5 && ctx.Err() == nil; try++ {
			j, gerr := s.n.renterJobs.get(id)
			if gerr != nil || len(j.Lease) == 0 || j.Provider == "" {
				break
			}
			time.Sleep(time.Duration(try+1) * time.Second)
			var ev wireEvent
			if err = s.n.renterJobs.exchange(ctx, j.Provider, jobProto, jobRequest{Kind: "cancel", Lease: j.Lease}, &ev); err == nil && ev.Type == "error" {
				err = errors.New(ev.Error)
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
// removed; each replica's RTT is its provider's.
func (s *services) keep(ctx context.Context, name string, gw *gateway.Gateway) {
	added := map[string]string{} // job ID -> provider
	t := time.NewTicker(serviceSync)
	defer t.Stop()
	for {
		s.mu.Lock()
		var ids []string
		if rec := s.recs[name]; rec != nil {
			ids = rec.Replicas
		}
		s.mu.Unlock()
		for _, id := range ids {
			j, err := s.n.renterJobs.get(id)
			live := err == nil && j.State == StateRunning && j.Provider != ""
			if prov, ok := added[id]; ok && (!live || prov != j.Provider) {
				gw.Remove(id)
				delete(added, id)
			}
			if !live {
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
			gw.Add(gateway.Replica{ID: id, RTT: rtt, Dial: func(ctx context.Context) (net.Conn, error) {
				return s.n.DialService(ctx, pid, jobID)
			}})
			added[id] = j.Provider
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// down cancels every replica job and closes the gateway.
func (s *services) down(name string) (*ServiceRecord, error) {
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
	s.cancelJobs(rec.Replicas)
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
}

// ServiceView is a service as service_up, service_list and service_status
// show it.
type ServiceView struct {
	Name     string           `json:"name"`
	URL      string           `json:"url,omitempty" doc:"the gateway's address; empty while it is down"`
	Gateway  string           `json:"gateway" doc:"up, or down with why in gateway_error"`
	Error    string           `json:"gateway_error,omitempty"`
	Port     int              `json:"port"`
	Created  time.Time        `json:"created"`
	Replicas []ServiceReplica `json:"replicas"`
	Stats    *gateway.Stats   `json:"stats,omitempty" doc:"the gateway's figures (service_status only)"`
}

func (s *services) view(name string, stats bool) (*ServiceView, error) {
	s.mu.Lock()
	rec, ok := s.recs[name]
	ls := s.live[name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no service %q (see `gleaner service ls`)", name)
	}
	v := &ServiceView{Name: rec.Name, Port: rec.Port, Created: rec.Created, Gateway: "down", Replicas: []ServiceReplica{}}
	ready := map[string]bool{}
	switch {
	case ls != nil && ls.gw != nil:
		v.URL, v.Gateway = ls.url, "up"
		st := ls.gw.Stats()
		for _, r := range st.Replicas {
			ready[r.ID] = r.Ready
		}
		if stats {
			v.Stats = &st
		}
	case ls != nil:
		v.Error = ls.err + "; free port " + strconv.Itoa(rec.Port) + " and restart this node, or `gleaner service down " + rec.Name + "` and up again"
	default:
		v.Error = "not started"
	}
	for i, id := range rec.Replicas {
		r := ServiceReplica{Index: i, Job: id, Ready: ready[id]}
		if j, err := s.n.renterJobs.get(id); err == nil {
			r.State, r.Provider = j.State, j.Provider
		}
		v.Replicas = append(v.Replicas, r)
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
