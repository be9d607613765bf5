package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestPickScoresOutstandingTimesRTT(t *testing.T) {
	g := New(Config{})
	g.SetReplicas([]Replica{{ID: "a", RTT: time.Millisecond, Ready: true}, {ID: "b", RTT: 4 * time.Millisecond, Ready: true}})
	// a scores 1000, 2000, 3000, 4000 µs as it fills; b 4000 idle: the
	// tie goes to b, which has fewer outstanding.
	var got []string
	for range 5 {
		got = append(got, g.pick(nil).id)
	}
	if want := []string{"a", "a", "a", "b", "a"}; !equal(got, want) {
		t.Fatalf("picks %v, want %v", got, want)
	}
	if r := g.pick([]*replica{g.lookup("a")}); r.id != "b" {
		t.Fatalf("excluding a picked %s", r.id)
	}
	g.SetReady("b", false)
	if r := g.pick(nil); r.id != "a" {
		t.Fatalf("b not ready, picked %s", r.id)
	}
	g.SetReady("a", false)
	if r := g.pick(nil); r != nil {
		t.Fatalf("none ready, picked %s", r.id)
	}
	// An RTT under the floor counts as the floor.
	g = New(Config{RTTFloor: 2 * time.Millisecond})
	g.SetReplicas([]Replica{{ID: "a", Ready: true}, {ID: "b", RTT: 2 * time.Millisecond, Ready: true}})
	if sa, sb := g.score(g.lookup("a")), g.score(g.lookup("b")); sa != 2000 || sb != 2000 {
		t.Fatalf("scores %d %d, want 2000 2000", sa, sb)
	}
	g.SetRTT("b", 10*time.Millisecond)
	if sb := g.score(g.lookup("b")); sb != 10000 {
		t.Fatalf("score after SetRTT %d", sb)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Idle, the lower RTT takes all; loaded, the other replica takes over.
func TestRoutingPrefersLowerRTTThenLessLoaded(t *testing.T) {
	arrived := make(chan struct{}, 8)
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	})
	a, b := newBackend(t, h), newBackend(t, h)
	c := newClient(t)

	_, url := startGateway(t, Config{}, a.replica("a", time.Millisecond), b.replica("b", 10*time.Millisecond))
	for range 20 {
		if code, rep, _ := get(t, c, url+"/fast"); code != 200 || rep != "a" {
			t.Fatalf("idle: %d from %q, want 200 from a", code, rep)
		}
	}

	// a: 1 ms, b: 2.5 ms. Two requests held on a make its score 3000 µs
	// against b's 2500.
	_, url = startGateway(t, Config{}, a.replica("a", time.Millisecond), b.replica("b", 2500*time.Microsecond))
	done := make(chan string, 2)
	for range 2 {
		go func() {
			resp, err := c.Get(url + "/slow")
			if err != nil {
				done <- err.Error()
				return
			}
			resp.Body.Close()
			done <- resp.Header.Get("X-Gleaner-Replica")
		}()
		<-arrived
	}
	if code, rep, _ := get(t, c, url+"/fast"); code != 200 || rep != "b" {
		t.Fatalf("a loaded: %d from %q, want 200 from b", code, rep)
	}
	close(release)
	for range 2 {
		if rep := <-done; rep != "a" {
			t.Fatalf("held request answered by %q, want a", rep)
		}
	}
}

func TestReadinessTakesOutAndPutsBack(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	a, b := newBackend(t, ok), newBackend(t, ok)
	g, url := startGateway(t, Config{FailThreshold: 2}, a.replica("a", time.Millisecond), b.replica("b", 5*time.Millisecond))
	c := newClient(t)
	ctx := context.Background()

	a.healthy.Store(false)
	if n := g.Probe(ctx); n != 2 {
		t.Fatalf("after one failed probe %d ready, want 2 (threshold 2)", n)
	}
	if n := g.Probe(ctx); n != 1 {
		t.Fatalf("after two failed probes %d ready, want 1", n)
	}
	if replicaStats(t, g, "a").Ready {
		t.Fatal("a still ready in stats")
	}
	for range 5 {
		if code, rep, _ := get(t, c, url+"/x"); code != 200 || rep != "b" {
			t.Fatalf("a out: %d from %q", code, rep)
		}
	}
	a.healthy.Store(true)
	if n := g.Probe(ctx); n != 2 {
		t.Fatalf("after a passing probe %d ready, want 2", n)
	}
	if code, rep, _ := get(t, c, url+"/x"); code != 200 || rep != "a" {
		t.Fatalf("a back: %d from %q", code, rep)
	}

}

func TestRunProbesBringsReplicaIn(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	a := newBackend(t, ok)
	changes := make(chan bool, 16)
	r := a.replica("a", 0)
	r.Ready = false
	g := New(Config{ProbeInterval: time.Millisecond, FailThreshold: 1, OnReady: func(id string, ready bool) { changes <- ready }})
	g.Add(r)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { g.RunProbes(ctx); close(stopped) }()
	if !<-changes {
		t.Fatal("first change was to not ready")
	}
	a.healthy.Store(false)
	if <-changes {
		t.Fatal("second change was to ready")
	}
	cancel()
	<-stopped
}

func TestNoReadyReplicaIs503(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	a := newBackend(t, ok)
	r := a.replica("a", 0)
	r.Ready = false
	g, url := startGateway(t, Config{Service: "llm"}, r)
	c := newClient(t)
	resp, err := c.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d Retry-After %q Content-Type %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
	}
	_, _, body := get(t, c, url+"/v1/models")
	if code := errorCode(t, body); code != "no_ready_replica" {
		t.Fatalf("code %q", code)
	}
	if a.hits.Load() != 0 {
		t.Fatal("a not ready but reached")
	}
	if st := g.Stats(); st.Requests != 2 || st.Errors != 2 {
		t.Fatalf("stats %+v", st.Figures)
	}
}

// RouteRandom ignores RTT and load but still only picks ready replicas
// not yet tried, and counts them outstanding.
func TestRouteRandomPicksAnyReady(t *testing.T) {
	g := New(Config{Route: RouteRandom})
	g.SetReplicas([]Replica{
		{ID: "a", RTT: time.Millisecond, Ready: true},
		{ID: "b", RTT: time.Second, Ready: true},
		{ID: "c", Ready: false},
	})
	seen := map[string]int{}
	for range 400 {
		seen[g.pick(nil).id]++
	}
	if seen["a"] < 100 || seen["b"] < 100 || seen["c"] != 0 {
		t.Fatalf("picks %v: want a and b about evenly, never c", seen)
	}
	if o := g.lookup("a").outstanding.Load() + g.lookup("b").outstanding.Load(); o != 400 {
		t.Fatalf("outstanding %d, want 400", o)
	}
	if r := g.pick([]*replica{g.lookup("a")}); r.id != "b" {
		t.Fatalf("excluding a picked %s", r.id)
	}
	if r := g.pick([]*replica{g.lookup("a"), g.lookup("b")}); r != nil {
		t.Fatalf("all tried, picked %s", r.id)
	}
}
