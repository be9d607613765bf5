package gateway

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Readiness: a replica is taken out after FailThreshold consecutive
// failures (a probe that errs, times out or answers other than 2xx, or a
// request whose dial fails) and put back by the first probe that passes.
// RunProbes is the gateway's own loop; the node may instead (or also) call
// Probe on its own schedule, or decide for itself with SetReady.

// Probe checks every replica once, concurrently, over its own Dial, and
// returns when all have answered or timed out. It returns how many are
// ready after it.
func (g *Gateway) Probe(ctx context.Context) int {
	reps := g.snapshot()
	var wg sync.WaitGroup
	for _, rep := range reps {
		wg.Go(func() { g.probe(ctx, rep) })
	}
	wg.Wait()
	ready := 0
	for _, rep := range reps {
		if rep.ready.Load() {
			ready++
		}
	}
	return ready
}

// ProbeOne checks the replica id once and reports whether it is ready
// after it, and whether there is such a replica. The node uses it to
// check a replica that has just started more often than ProbeInterval
// until it first passes, so that it takes traffic as soon as it can.
func (g *Gateway) ProbeOne(ctx context.Context, id string) (ready, found bool) {
	rep := g.lookup(id)
	if rep == nil {
		return false, false
	}
	g.probe(ctx, rep)
	return rep.ready.Load(), true
}

// RunProbes probes every ProbeInterval until ctx ends.
func (g *Gateway) RunProbes(ctx context.Context) {
	t := time.NewTicker(g.cfg.ProbeInterval)
	defer t.Stop()
	for {
		g.Probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *Gateway) probe(ctx context.Context, rep *replica) {
	if g.probeOK(ctx, rep) {
		rep.fails.Store(0)
		g.setReady(rep, true)
		return
	}
	if ctx.Err() == nil { // a probe cut by our own shutdown says nothing
		g.noteFailure(rep)
	}
}

func (g *Gateway) probeOK(ctx context.Context, rep *replica) bool {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.ProbeTimeout)
	defer cancel()
	u, err := url.Parse("http://replica" + g.cfg.ReadyPath)
	if err != nil {
		return false
	}
	req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "localhost"}).WithContext(ctx)
	resp, err := rep.tr.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return resp.StatusCode/100 == 2
}

// setReady is a readiness change by the gateway itself.
func (g *Gateway) setReady(rep *replica, ready bool) {
	if rep.ready.Swap(ready) != ready && g.cfg.OnReady != nil {
		g.cfg.OnReady(rep.id, ready)
	}
}
