package sim

import (
	"container/heap"
	"context"
	"time"
)

// world is the simulation's virtual time and its one thread of control.
// Events run in (time, sequence) order on the loop's goroutine; the real
// auctioneer (renter.Auctioneer.Place) runs as coroutines: each job's
// goroutine runs only while the loop waits for it, until it sleeps on
// the virtual clock or returns, so that exactly one thing happens at a
// time and a seed gives the same run every time. The auctioneer's quote
// fan-out runs in goroutines of its own, but they only call the in-memory
// transport, which answers at once and never sleeps.
type world struct {
	now    time.Duration // since Epoch
	seq    uint64
	events eventHeap
	parked chan struct{} // a coroutine slept or returned
	stop   time.Duration // nothing runs after this
}

type event struct {
	at   time.Duration
	seq  uint64
	fn   func()        // a callback on the loop's goroutine, or
	wake chan struct{} // a sleeping coroutine to resume
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*h = old[:len(old)-1]
	return e
}

func newWorld(stop time.Duration) *world {
	return &world{parked: make(chan struct{}), stop: stop}
}

// Now is the virtual time: the renter.Clock and what providers are told.
func (w *world) Now() time.Time { return Epoch.Add(w.now) }

// secs is the virtual time in whole seconds from Epoch.
func (w *world) secs() int64 { return int64(w.now / time.Second) }

// at schedules fn at t (never before now).
func (w *world) at(t time.Duration, fn func()) {
	w.push(event{at: max(t, w.now), fn: fn})
}

// after schedules fn d from now.
func (w *world) after(d time.Duration, fn func()) { w.at(w.now+d, fn) }

func (w *world) push(e event) {
	w.seq++
	e.seq = w.seq
	heap.Push(&w.events, e)
}

// Sleep is the coroutine's wait on the virtual clock (renter.Clock). The
// simulation never cancels a context, so it returns ctx's error only if
// the caller's context was done already.
func (w *world) Sleep(ctx context.Context, d time.Duration) error {
	wake := make(chan struct{})
	w.push(event{at: w.now + max(d, 0), wake: wake})
	w.parked <- struct{}{}
	<-wake
	return ctx.Err()
}

// WithTimeoutCause is renter.DeadlineClock's: deadlines in the simulation
// are enforced by the transport, which knows each message's fate when it
// is sent, so the context itself never times out (a timer on the wall
// clock would make a run depend on the machine's speed).
func (w *world) WithTimeoutCause(ctx context.Context, _ time.Duration, _ error) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}

// spawn runs f as a coroutine, starting now (as an event, so that a
// coroutine can spawn another without waiting for itself).
func (w *world) spawn(f func()) {
	w.after(0, func() {
		start := make(chan struct{})
		go func() {
			<-start
			f()
			w.parked <- struct{}{}
		}()
		w.resume(start)
	})
}

// resume hands control to a coroutine and waits until it sleeps or ends.
func (w *world) resume(ch chan struct{}) {
	close(ch)
	<-w.parked
}

// run processes events until none is left before the stop time; each
// tick of progress (at most every simulated hour) calls progress.
func (w *world) run(progress func(now time.Duration)) {
	next := time.Duration(0)
	for w.events.Len() > 0 {
		e := heap.Pop(&w.events).(event)
		if e.at > w.stop {
			heap.Push(&w.events, e)
			break
		}
		w.now = e.at
		if progress != nil && w.now >= next {
			progress(w.now)
			next = w.now + time.Hour
		}
		if e.fn != nil {
			e.fn()
		} else {
			w.resume(e.wake)
		}
	}
	w.now = w.stop
}

// drain resumes every coroutine still asleep, once the run's context is
// cancelled: each returns from the auctioneer at once, so no goroutine
// outlives the run. Callbacks left are dropped.
func (w *world) drain() {
	for w.events.Len() > 0 {
		e := heap.Pop(&w.events).(event)
		if e.wake != nil {
			w.resume(e.wake)
		}
	}
}
