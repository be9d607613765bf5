package providing

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// These tests run in a synctest bubble: time is virtual, so "send
// returned at once" is exact (no time passed) and a write deadline of ten
// seconds costs nothing.

// fakeStream is a follower's stream in memory. A stuck one is a renter
// that stopped reading: its Write blocks until its write deadline, a Reset
// or a Close. Any other takes delay per Write and keeps what was written.
type fakeStream struct {
	network.Stream // nil: what the hub must not use
	stuck          bool
	delay          time.Duration

	mu       sync.Mutex // guards what follows
	buf      bytes.Buffer
	deadline time.Time
	reset    bool
	closed   bool
	atClose  int           // buf's length when the stream was closed
	gone     chan struct{} // closed by Reset or Close
}

func newFakeStream(stuck bool, delay time.Duration) *fakeStream {
	return &fakeStream{stuck: stuck, delay: delay, gone: make(chan struct{})}
}

func (f *fakeStream) Protocol() protocol.ID { return "/gleaner/" + wire.JobProto }

func (f *fakeStream) SetWriteDeadline(t time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline = t
	return nil
}

func (f *fakeStream) Write(p []byte) (int, error) {
	f.mu.Lock()
	deadline := f.deadline
	f.mu.Unlock()
	var expired <-chan time.Time
	if !deadline.IsZero() {
		expired = time.After(time.Until(deadline))
	}
	if f.stuck {
		select {
		case <-f.gone:
			return 0, network.ErrReset
		case <-expired:
			return 0, os.ErrDeadlineExceeded
		}
	}
	if f.delay > 0 {
		select {
		case <-f.gone:
		case <-time.After(f.delay):
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reset || f.closed {
		return 0, network.ErrReset
	}
	return f.buf.Write(p)
}

func (f *fakeStream) Reset() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.reset && !f.closed {
		close(f.gone)
	}
	f.reset = true
	return nil
}

func (f *fakeStream) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.reset && !f.closed {
		close(f.gone)
		f.closed, f.atClose = true, f.buf.Len()
	}
	return nil
}

func (f *fakeStream) wasReset() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reset
}

// events is what the stream carried, and for a closed one only what it
// carried before it was closed.
func (f *fakeStream) events(t *testing.T) []wire.Event {
	t.Helper()
	f.mu.Lock()
	b := bytes.Clone(f.buf.Bytes())
	if f.closed {
		b = b[:f.atClose]
	}
	f.mu.Unlock()
	var out []wire.Event
	for r := bytes.NewReader(b); ; {
		var ev wire.Event
		err := wire.Read(r, wire.MaxJobFrame, &ev)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("event %d: %v", len(out), err)
		}
		out = append(out, ev)
	}
}

// logEvent is the i-th small log event of a job's output, as the log
// forwarder sends it.
func logEvent(i int) wire.Event {
	line := []byte("line " + strconv.Itoa(i) + "\n")
	off := int64(i)
	return wire.Event{Type: wire.EventLog, Log: line, Offset: &off}
}

// wantLogs checks that evs begin with logs 0..n-1, in order.
func wantLogs(t *testing.T, evs []wire.Event, n int) {
	t.Helper()
	if len(evs) < n {
		t.Fatalf("%d events, want at least %d", len(evs), n)
	}
	for i, ev := range evs[:n] {
		if ev.Type != wire.EventLog || ev.Offset == nil || *ev.Offset != int64(i) {
			t.Fatalf("event %d is %+v, want log %d", i, ev, i)
		}
	}
}

// queuedBytes is what the hub holds for s, and whether s still follows.
func queuedBytes(h *eventHub, s network.Stream) (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range h.sinks {
		if k.s == s {
			return k.bytes, true
		}
	}
	return 0, false
}

// A renter that stops reading delays neither the job's sends nor the
// other followers: every send returns at once, and a healthy follower
// has every event, in order.
func TestEventHubAStuckFollowerDelaysNoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &eventHub{}
		stuck, healthy := newFakeStream(true, 0), newFakeStream(false, 0)
		h.add(stuck)
		h.add(healthy)
		const n = 200
		start := time.Now()
		for i := range n {
			_ = h.send(logEvent(i))
		}
		_ = h.send(wire.Event{Type: wire.EventHeartbeat})
		if d := time.Since(start); d != 0 {
			t.Errorf("%d sends took %v with a stuck follower, want no time at all", n+1, d)
		}
		synctest.Wait()
		evs := healthy.events(t)
		wantLogs(t, evs, n)
		if len(evs) != n+1 || evs[n].Type != wire.EventHeartbeat {
			t.Errorf("the healthy follower got %d events, want %d logs then a heartbeat", len(evs), n)
		}
		h.detach(healthy)
		h.detach(stuck)
	})
}

// A follower whose queue would pass its bound is reset and dropped the
// moment it would, not before; its queue never holds more than the bound,
// and the healthy follower beside it loses nothing.
func TestEventHubResetsAFollowerWhoseQueueIsFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &eventHub{}
		stuck, healthy := newFakeStream(true, 0), newFakeStream(false, 0)
		h.add(stuck)
		h.add(healthy)
		chunk := func(i int) wire.Event { // a checkpoint's, the largest events sent
			data := make([]byte, 128<<10)
			data[0] = byte(i)
			return wire.Event{Type: wire.EventCheckpoint, Log: data}
		}
		fits := sinkQueueBytes / eventSize(chunk(0))
		if fits*(128<<10) < wire.MaxCheckpoint {
			t.Fatalf("a follower's queue holds %d checkpoint chunks, less than a whole checkpoint", fits)
		}
		start := time.Now()
		for i := range fits + 1 {
			_ = h.send(chunk(i))
			synctest.Wait() // the healthy follower is written what it was sent
			queued, follows := queuedBytes(h, stuck)
			if queued > sinkQueueBytes {
				t.Fatalf("after %d sends the stuck follower's queue holds %d bytes, over %d", i+1, queued, sinkQueueBytes)
			}
			if full := i == fits; follows == full || stuck.wasReset() != full {
				t.Fatalf("after %d sends (%d fit): the stuck follower follows %v, was reset %v", i+1, fits, follows, stuck.wasReset())
			}
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the sends took %v, want no time at all", d)
		}
		evs := healthy.events(t)
		if len(evs) != fits+1 {
			t.Fatalf("the healthy follower got %d events, want %d", len(evs), fits+1)
		}
		for i, ev := range evs {
			if ev.Type != wire.EventCheckpoint || len(ev.Log) != 128<<10 || ev.Log[0] != byte(i) {
				t.Fatalf("event %d is not checkpoint chunk %d", i, i)
			}
		}
		h.detach(healthy)
		h.detach(stuck)
	})
}

// The end of a run (run's and attach's detach before HandleJob closes the
// stream): a slow but healthy follower is written every event, the exit
// last, before its stream closes, while a stuck one beside it is reset.
func TestEventHubDeliversTheExitBeforeTheStreamCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &eventHub{}
		stuck, slow := newFakeStream(true, 0), newFakeStream(false, 100*time.Millisecond)
		h.add(stuck)
		h.add(slow)
		const n = 50
		start := time.Now()
		for i := range n {
			_ = h.send(logEvent(i))
		}
		_ = h.send(wire.Event{Type: wire.EventExit, Status: wire.StatusCompleted})
		if d := time.Since(start); d != 0 {
			t.Errorf("the sends took %v, want no time at all", d)
		}
		for _, s := range []*fakeStream{slow, stuck} {
			h.detach(s)
			_ = s.Close()
		}
		if d := time.Since(start); d > drainWait {
			t.Errorf("the run's end took %v, more than %v", d, drainWait)
		}
		evs := slow.events(t)
		wantLogs(t, evs, n)
		if len(evs) != n+1 || evs[n].Type != wire.EventExit {
			t.Fatalf("the slow follower got %d events before its stream closed, want %d logs then the exit", len(evs), n)
		}
		if !stuck.wasReset() {
			t.Error("the stuck follower was not reset")
		}
	})
}

// follow flushes before it frees the job's GPUs: by then every follower
// that reads has the exit (a stopping node closes its host once the
// GPUs are free), and the flush waits no longer than a stuck follower's
// write deadline.
func TestEventHubFlushWaitsForTheFollowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &eventHub{}
		stuck, slow := newFakeStream(true, 0), newFakeStream(false, 100*time.Millisecond)
		h.add(stuck)
		h.add(slow)
		start := time.Now()
		for i := range 20 {
			_ = h.send(logEvent(i))
		}
		_ = h.send(wire.Event{Type: wire.EventExit, Status: wire.StatusCompleted})
		if d := time.Since(start); d != 0 {
			t.Errorf("the sends took %v, want no time at all", d)
		}
		h.flush(drainWait)
		if d := time.Since(start); d > writeWait+time.Second {
			t.Errorf("the flush took %v: a stuck follower should have failed its write within %v", d, writeWait)
		}
		evs := slow.events(t)
		if len(evs) != 21 || evs[20].Type != wire.EventExit {
			t.Fatalf("after the flush the slow follower has %d events, want 20 logs and the exit", len(evs))
		}
		if !stuck.wasReset() {
			t.Error("the stuck follower was not reset")
		}
		h.detach(slow)
		h.detach(stuck)
	})
}

// A follower that reads, but too slowly for the job's output, skips log
// events rather than being reset: it still has the events that matter
// (the status, the exit), and its queue stays within the log share.
func TestEventHubASlowFollowerSkipsLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &eventHub{}
		slow := newFakeStream(false, 100*time.Millisecond)
		h.add(slow)
		const n = 200 // 3.2 MiB of output, three times the log share
		start := time.Now()
		for i := range n {
			off := int64(i) << 14
			_ = h.send(wire.Event{Type: wire.EventLog, Log: make([]byte, 16<<10), Offset: &off})
			if queued, _ := queuedBytes(h, slow); queued > sinkLogBytes {
				t.Fatalf("after %d log events the queue holds %d bytes, over %d", i+1, queued, sinkLogBytes)
			}
		}
		_ = h.send(wire.Event{Type: wire.EventStatus, Status: wire.StatusRunning})
		_ = h.send(wire.Event{Type: wire.EventExit, Status: wire.StatusCompleted})
		if d := time.Since(start); d != 0 {
			t.Errorf("the sends took %v, want no time at all", d)
		}
		h.detach(slow)
		evs := slow.events(t)
		if slow.wasReset() || len(evs) < 2 {
			t.Fatalf("the slow follower was reset (%v) or has too few events (%d)", slow.wasReset(), len(evs))
		}
		if len(evs) >= n+2 {
			t.Errorf("the slow follower got all %d log events", n)
		}
		if evs[len(evs)-2].Status != wire.StatusRunning || evs[len(evs)-1].Type != wire.EventExit {
			t.Errorf("the slow follower's last events are %+v, %+v; want the status and the exit", evs[len(evs)-2], evs[len(evs)-1])
		}
		last := int64(-1)
		for _, ev := range evs[:len(evs)-2] {
			if *ev.Offset <= last {
				t.Fatalf("log at %d after %d: out of order", *ev.Offset, last)
			}
			last = *ev.Offset
		}
	})
}

// A follower that reads, however slowly, but has more queued than it
// can be written in drainWait is reset when its run ends, not waited for.
func TestEventHubDetachGivesUpAfterDrainWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &eventHub{}
		crawling := newFakeStream(false, 5*time.Second) // within writeWait, every time
		h.add(crawling)
		for i := range 100 {
			_ = h.send(logEvent(i))
		}
		start := time.Now()
		h.detach(crawling)
		if d := time.Since(start); d != drainWait {
			t.Errorf("detach took %v, want %v", d, drainWait)
		}
		if !crawling.wasReset() {
			t.Error("the follower was not reset")
		}
		synctest.Wait() // its writer has ended
	})
}
