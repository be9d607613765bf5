package node

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// steadyLoad is clients sending requests through a service's gateway,
// each one every `every` (back to back when 0), until stop; the service
// tests assert that none of them failed across a replica's loss,
// preemption, renewal or scaling.
type steadyLoad struct {
	sent, failed atomic.Int64
	lastErr      atomic.Value // the last failure's text
	stop         func()       // ends the clients and waits for them; idempotent
}

func startLoad(clients int, every time.Duration, request func(*http.Client) error) *steadyLoad {
	l := &steadyLoad{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			hc := &http.Client{Timeout: 10 * time.Second}
			defer hc.CloseIdleConnections()
			for {
				select {
				case <-done:
					return
				case <-time.After(every):
				}
				l.sent.Add(1)
				if err := request(hc); err != nil {
					l.failed.Add(1)
					l.lastErr.Store(err.Error())
				}
			}
		})
	}
	l.stop = sync.OnceFunc(func() { close(done); wg.Wait() })
	return l
}

// restartRenter stops rn cleanly, starts it again on the same repo and
// connects it to peers (a test's nodes have no DHT to find them by).
func restartRenter(t *testing.T, ctx context.Context, rn *Node, peers ...*Node) *Node {
	t.Helper()
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	err := rn.Stop(sctx)
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	rn = startAgain(t, ctx, rn)
	for _, p := range peers {
		if err := rn.Host().LibP2P().Connect(ctx, addrInfo(p.Host())); err != nil {
			t.Fatal(err)
		}
	}
	return rn
}
