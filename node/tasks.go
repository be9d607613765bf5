package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/network"
)

// tasks are the long-lived goroutines a node starts (job runners and
// followers, voucher senders, the offer publisher, the GPU monitor) and
// the stream handlers that write to its stores. Stop cancels their
// context and waits for them before it closes anything they use.
type tasks struct {
	mu      sync.Mutex // guards stopped, so that no wg.Add races wg.Wait
	stopped bool
	wg      sync.WaitGroup
	running atomic.Int64
}

// Go runs f on a goroutine Stop waits for. Once Stop has begun waiting it
// runs nothing and returns false.
func (t *tasks) Go(f func()) bool {
	if !t.enter() {
		return false
	}
	go func() {
		defer t.exit()
		f()
	}()
	return true
}

// handler makes Stop wait for h's streams too; a stream that arrives once
// Stop has begun waiting is reset.
func (t *tasks) handler(h network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) {
		if !t.enter() {
			_ = s.Reset()
			return
		}
		defer t.exit()
		h(s)
	}
}

func (t *tasks) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.wg.Add(1)
	t.running.Add(1)
	return true
}

func (t *tasks) exit() {
	t.running.Add(-1)
	t.wg.Done()
}

// wait refuses new tasks and waits for the running ones, until ctx ends.
func (t *tasks) wait(ctx context.Context) error {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d of the node's goroutines still running at the stop deadline: %w", t.running.Load(), ctx.Err())
	}
}
