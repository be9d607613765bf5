package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Drain takes a replica out at once (new requests go to the other) and
// returns only once the request in flight on it has been answered whole.
func TestDrainWaitsForRequestsInFlight(t *testing.T) {
	release := make(chan struct{})
	slow := newBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		_, _ = io.WriteString(w, "slow answer")
	}))
	fast := newBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "fast answer")
	}))
	g, url := startGateway(t, Config{}, slow.replica("a-slow", time.Millisecond))
	got := make(chan string, 1)
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader("{}"))
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	for slow.hits.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	g.Add(fast.replica("b-fast", time.Millisecond))

	drained := make(chan bool, 1)
	go func() { drained <- g.Drain(context.Background(), "a-slow") }()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-drained:
		t.Fatal("Drain returned with a request in flight")
	default:
	}
	// Out of the set already: a new request goes to the other replica.
	resp, err := http.Get(url + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if r := resp.Header.Get("X-Gleaner-Replica"); r != "b-fast" {
		t.Fatalf("a request during the drain went to %q", r)
	}
	close(release)
	if !<-drained {
		t.Fatal("Drain said the requests did not finish")
	}
	if s := <-got; s != "slow answer" {
		t.Fatalf("the request in flight got %q", s)
	}
	if g.Drain(context.Background(), "a-slow") {
		t.Fatal("a second Drain found the replica")
	}
}
