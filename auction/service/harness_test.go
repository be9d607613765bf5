package service

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// The reconciler's tests run in virtual time: a fake node (world) holds
// the jobs, the gateway's readiness and the market, Ticks the reconciler
// at a manual now and carries out its actions as the node's keeper does.

var t0 = time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)

// parseSpec parses a service spec from its service section and extras.
func parseSpec(t testing.TB, service, extra string) *auction.JobSpec {
	t.Helper()
	y := "name: svc\nkind: service\nimage: example.com/model:1\n" +
		"service:\n  port: 8000\n  readiness: {path: /health, period: 1s}\n" + service +
		"resources: {gpus: 1}\nmax_price: 1.00\nduration: {max: 1h}\n" + extra
	if !containsLine(extra, "tier:") {
		y += "tier: bronze\n"
	}
	spec, err := auction.ParseJobSpec([]byte(y))
	if err != nil {
		t.Fatalf("spec: %v\n%s", err, y)
	}
	return spec
}

func containsLine(s, prefix string) bool {
	for i := 0; i+len(prefix) <= len(s); i++ {
		if (i == 0 || s[i-1] == '\n') && s[i:i+len(prefix)] == prefix {
			return true
		}
	}
	return false
}

// world is a fake node around one reconciler.
type world struct {
	t     testing.TB
	r     *Reconciler
	now   time.Time
	jobs  map[string]Job
	ready map[string]bool // in the gateway and ready
	scale int
	qps   float64

	// The market: with auto set, a placed job runs at once on the first
	// provider of providers that no Exclude names (an Avoid one only
	// when no other is free), else ends no-match. Without it, a placed
	// job waits in Pending for the test to run it.
	auto      bool
	providers []string
	lease     time.Duration // a running job's lease; 0: none known
	failPlace bool          // submits fail

	tickHeld []string // the providers of the jobs placed in this Tick
	seq      int
	placed   []Place           // every Place carried out, in order
	specs    map[string]Place  // job -> the Place that bought it
	acts     []Action          // the last Tick's actions
	released map[string]bool   // jobs released
	retired  []string          // jobs retired
	saves    int               // record writes: a Tick with a Save or a placement bought
	dropped  map[string]bool   // jobs out of the gateway
	cancels  map[string]string // job -> why it was cancelled ("" when asked by the reconciler)
}

func newWorld(t testing.TB, spec *auction.JobSpec, replicas int, cfg Config) *world {
	w := &world{t: t, now: t0, jobs: map[string]Job{}, ready: map[string]bool{}, specs: map[string]Place{},
		released: map[string]bool{}, dropped: map[string]bool{}, cancels: map[string]string{}}
	var rec Record
	for i := range replicas {
		id := w.newJob()
		rec.Replicas = append(rec.Replicas, id)
		w.specs[id] = Place{Kind: Add, Index: i, Spec: ReplicaSpec(spec, i, t0)}
	}
	w.r = New("svc", spec, rec, cfg)
	return w
}

func (w *world) newJob() string {
	w.seq++
	id := fmt.Sprintf("j%d", w.seq)
	w.jobs[id] = Job{Phase: Pending, State: "auction", Updated: w.now}
	return id
}

// observe is what the node would observe now.
func (w *world) observe() Observed {
	o := Observed{Scale: w.scale, Jobs: map[string]Job{}, QPS: w.qps}
	for _, id := range w.r.Members() {
		j, ok := w.jobs[id]
		if !ok {
			continue
		}
		o.Jobs[id] = j
		if j.Phase == Running && !j.Serving.IsZero() {
			o.Gateway = append(o.Gateway, Replica{ID: id, Ready: w.ready[id]})
		}
	}
	return o
}

// tick Ticks the reconciler at now and carries out its actions.
func (w *world) tick() []Action {
	w.acts = w.r.Tick(w.now, w.observe())
	w.tickHeld = nil
	stopped := map[PlaceKind]bool{}
	save := false
	defer func() {
		if save {
			w.saves++
		}
	}()
	for _, a := range w.acts {
		switch a := a.(type) {
		case Place:
			if stopped[a.Kind] {
				continue
			}
			w.placed = append(w.placed, a)
			if w.failPlace {
				if !w.r.Placed(w.now, a, "", errors.New("store full")) {
					stopped[a.Kind] = true
				}
				continue
			}
			id := w.newJob()
			w.specs[id] = a
			save = true
			if !w.r.Placed(w.now, a, id, nil) {
				stopped[a.Kind] = true
			}
			if a.Kind == Replace {
				w.released[a.Old], w.dropped[a.Old] = true, true
			}
			if w.auto {
				w.market(id, a)
			}
		case Release:
			w.released[a.Job] = true
		case Drop:
			w.dropped[a.Job] = true
			delete(w.ready, a.Job)
		case Cancel:
			w.end(a.Job, Done, "cancelled", "")
			w.cancels[a.Job] = ""
		case Retire:
			w.retired = append(w.retired, a.Job)
			delete(w.ready, a.Job)
			w.end(a.Job, Done, "cancelled", "")
		case Save:
			save = true
		case Log:
		}
	}
	return w.acts
}

// market places job id as the auto market does: on the first provider
// that p.Exclude does not name, an Avoid one only when no other is free.
// It also keeps the replicas placed in the same Tick apart, as the node's
// auction group does for auctions that run together (a Tick cannot know
// where its other placements will land); of the service's other replicas
// it knows nothing, so one the reconciler forgot to exclude gets a
// sibling on its provider.
func (w *world) market(id string, p Place) {
	excluded := map[string]bool{}
	for _, prov := range p.Exclude {
		excluded[prov] = true
	}
	for _, prov := range w.tickHeld {
		excluded[prov] = true
	}
	defer func() {
		if prov := w.jobs[id].Provider; prov != "" {
			w.tickHeld = append(w.tickHeld, prov)
		}
	}()
	pick := ""
	for _, last := range []bool{false, true} {
		for _, prov := range w.providers {
			if pick == "" && !excluded[prov] && slices.Contains(p.Avoid, prov) == last {
				pick = prov
			}
		}
	}
	if pick == "" {
		w.end(id, NoMatch, "no-match", "no offer matched")
		return
	}
	w.run(id, pick)
}

// runAll runs the replicas on the first providers, one each.
func (w *world) runAll() {
	for i, id := range w.replicas() {
		w.run(id, w.providers[i])
	}
}

// run has job id run on prov from now, in the gateway.
func (w *world) run(id, prov string) {
	j := w.jobs[id]
	j.Phase, j.State, j.Provider, j.Started, j.Updated, j.Serving = Running, "running", prov, true, w.now, w.now
	if w.lease > 0 {
		j.Lease = Lease{CID: "lease-" + id + "-" + w.now.Format("150405"), Start: w.now, End: w.now.Add(w.lease)}
	}
	w.jobs[id] = j
}

// end ends job id in phase p.
func (w *world) end(id string, p Phase, state, why string) {
	j, ok := w.jobs[id]
	if !ok || j.Phase.Ended() {
		return
	}
	j.Phase, j.State, j.Error, j.Updated, j.Serving = p, state, why, w.now, time.Time{}
	if p == NoMatch || p == Failed && !j.Started {
		j.Why = "ended " + state + ": " + why
	}
	w.jobs[id] = j
	delete(w.ready, id)
}

// live are the jobs of the record's replicas and successors that have
// not ended, with their providers.
func (w *world) live() map[string]string {
	out := map[string]string{}
	for _, id := range w.r.Members() {
		if j := w.jobs[id]; !j.Phase.Ended() && j.Provider != "" {
			out[id] = j.Provider
		}
	}
	return out
}

// places are the Places of the last Tick.
func (w *world) places() []Place {
	var out []Place
	for _, a := range w.acts {
		if p, ok := a.(Place); ok {
			out = append(out, p)
		}
	}
	return out
}

func (w *world) replicas() []string { return w.r.Record().Replicas }

// readyAll marks every running replica ready.
func (w *world) readyAll() {
	for id, j := range w.jobs {
		if j.Phase == Running {
			w.ready[id] = true
		}
	}
}

func sortedKeys[M ~map[string]V, V any](m M) []string { return slices.Sorted(maps.Keys(m)) }
