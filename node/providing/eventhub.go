package providing

import (
	"slices"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/node/wire"
)

// eventHub fans a job's events out to every stream following it: the one
// that started it and any a restarted renter attached later.
//
// Each follower has its own queue and its own writer goroutine, the only
// one that writes to its stream from add until detach. send only queues,
// so nothing that sends (the job's log forwarding, heartbeats, telemetry,
// status changes, the exit) waits on the network, and a follower that
// stops reading delays neither the job nor the other followers. A
// follower that falls behind first loses log output, as it would to the
// executor's ring; one that still does not read, or whose write fails, is
// reset and dropped: its renter attaches again, which replays the
// retained tail of the output.
type eventHub struct {
	mu    sync.Mutex // guards sinks and everything in each sink but s; never held across a write
	sinks []*sink
}

// sink is one follower of a job: its stream and what is queued for it.
type sink struct {
	s      Stream
	queue  []queued // oldest first
	bytes  int      // what queue and the event being written hold, as eventSize counts
	skip   bool     // log events are skipped until the queue has drained to half of sinkLogBytes
	ending bool     // nothing more is queued: the writer ends once queue is written (or dropped)
	wake   *sync.Cond
	done   chan struct{} // closed when the writer has ended
}

// queued is an event to write, or, with mark set, a flush's marker:
// closed once everything queued before it is written.
type queued struct {
	ev   wire.Event
	mark chan struct{}
}

const (
	// writeWait bounds the write of one event: a follower that takes
	// longer has stopped reading.
	writeWait = 10 * time.Second
	// sinkLogBytes is how far a follower may fall behind before its log
	// events are skipped: it then sees a gap in the output's offsets, as
	// when the executor's ring overruns (executor.DefaultLogBytes, the
	// same size), and the renter keeps what follows (node/renting/logs.go).
	// A job that prints faster than its renter's link carries must not
	// have the renter reset for it: a renter that attaches again after the
	// job has ended never hears its exit.
	sinkLogBytes = 1 << 20
	// sinkQueueBytes bounds what one follower's queue holds: a whole
	// checkpoint, shipped in one burst at the end (wire.MaxCheckpoint in
	// 128 KiB events), on top of the log share and the other events
	// (heartbeats, telemetry, status), which are small and rare. A
	// follower whose queue would pass it is reset and dropped.
	sinkQueueBytes = wire.MaxCheckpoint + 2*sinkLogBytes
	// eventOverhead is what an event costs beyond its payload: the
	// struct, its short fields, its frame.
	eventOverhead = 512
	// drainWait bounds how long the end of a run waits for a follower to
	// be written what was queued for it: a whole checkpoint at a few
	// hundred KB/s. One that stopped reading fails sooner (writeWait).
	drainWait = 30 * time.Second
)

// eventSize is what ev counts against a follower's queue.
func eventSize(ev wire.Event) int { return eventOverhead + len(ev.Log) + len(ev.Error) }

// add makes s a follower: every event sent from now on is written to it,
// in order, until detach. The caller detaches s before closing it.
func (h *eventHub) add(s Stream) {
	k := &sink{s: s, wake: sync.NewCond(&h.mu), done: make(chan struct{})}
	h.mu.Lock()
	h.sinks = append(h.sinks, k)
	h.mu.Unlock()
	go h.write(k)
}

// send queues ev for every follower and returns at once; it never fails.
// ev is written later: its slices (Log) must not change after the call.
func (h *eventHub) send(ev wire.Event) error {
	ev.Time = time.Now()
	size := eventSize(ev)
	var full []*sink
	h.mu.Lock()
	for _, k := range h.sinks {
		if ev.Type == wire.EventLog {
			if (k.skip && k.bytes > sinkLogBytes/2) || k.bytes+size > sinkLogBytes {
				k.skip = true
				continue
			}
			k.skip = false
		}
		if k.bytes+size > sinkQueueBytes {
			full = append(full, k)
			continue
		}
		k.queue = append(k.queue, queued{ev: ev})
		k.bytes += size
		k.wake.Signal()
	}
	for _, k := range full {
		h.dropLocked(k)
	}
	h.mu.Unlock()
	resetStreams(full)
	return nil
}

// flush waits until every follower has been written what was sent
// before it, for at most wait; a follower that has not by then is reset
// and dropped. The end of a run flushes before it frees the job's GPUs:
// its followers have the last event by then (and a node that stops,
// which waits for that, does not close its host under them).
func (h *eventHub) flush(wait time.Duration) {
	h.mu.Lock()
	sinks := slices.Clone(h.sinks)
	marks := make([]chan struct{}, len(sinks))
	for i, k := range sinks {
		marks[i] = make(chan struct{})
		k.queue = append(k.queue, queued{mark: marks[i]})
		k.wake.Signal()
	}
	h.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var late []*sink
	for i, k := range sinks {
		if len(late) > 0 {
			select { // out of time: only what is done already counts
			case <-marks[i]:
			case <-k.done:
			default:
				late = append(late, k)
			}
			continue
		}
		select {
		case <-marks[i]:
		case <-k.done: // dropped
		case <-timer.C:
			late = append(late, k)
		}
	}
	h.drop(late...)
}

// detach ends s's following: nothing more is queued for it, and it
// returns once what was is written, for at most drainWait; a stream that
// has not been written all by then is reset. The caller may close s after.
func (h *eventHub) detach(s Stream) {
	h.mu.Lock()
	i := slices.IndexFunc(h.sinks, func(k *sink) bool { return k.s == s })
	if i < 0 {
		h.mu.Unlock()
		return // dropped already
	}
	k := h.sinks[i]
	h.sinks = slices.Delete(h.sinks, i, i+1)
	k.ending = true
	k.wake.Signal()
	h.mu.Unlock()
	timer := time.NewTimer(drainWait)
	defer timer.Stop()
	select {
	case <-k.done:
	case <-timer.C:
		h.drop(k)
	}
}

// write is k's writer: it writes k's queue to its stream, in order, until
// k ends or is dropped. A write that fails drops k.
func (h *eventHub) write(k *sink) {
	defer close(k.done)
	written := 0 // the size of the event last written, still counted in k.bytes
	for {
		h.mu.Lock()
		k.bytes = max(0, k.bytes-written) // 0 once dropped
		for len(k.queue) == 0 && !k.ending {
			k.wake.Wait()
		}
		if len(k.queue) == 0 {
			h.mu.Unlock()
			return
		}
		q := k.queue[0]
		k.queue[0] = queued{} // not kept alive by the array
		k.queue = k.queue[1:]
		h.mu.Unlock()
		if q.mark != nil {
			close(q.mark)
			written = 0
			continue
		}
		_ = k.s.SetWriteDeadline(time.Now().Add(writeWait))
		if err := wire.Write(k.s, q.ev); err != nil {
			h.drop(k)
			return
		}
		written = eventSize(q.ev)
	}
}

// drop removes followers from the hub, forgets what is queued for them
// and resets their streams, which ends a write in progress.
func (h *eventHub) drop(ks ...*sink) {
	if len(ks) == 0 {
		return
	}
	h.mu.Lock()
	for _, k := range ks {
		h.dropLocked(k)
	}
	h.mu.Unlock()
	resetStreams(ks)
}

// resetStreams resets dropped followers' streams, outside the hub's lock.
func resetStreams(ks []*sink) {
	for _, k := range ks {
		_ = k.s.Reset()
	}
}

// dropLocked is drop's part under h.mu: the caller resets k.s after.
func (h *eventHub) dropLocked(k *sink) {
	h.sinks = slices.DeleteFunc(h.sinks, func(o *sink) bool { return o == k })
	clear(k.queue)
	k.queue, k.bytes, k.ending = nil, 0, true
	k.wake.Signal()
}
