package renter

import (
	"context"
	"time"
)

// Clock is the auctioneer's time: what it reads for bid validity and
// feasibility, and what it waits on for deadlines, jitter and backoff. The
// simulator passes a virtual clock, so that a week of re-auctions takes no
// real time.
type Clock interface {
	Now() time.Time
	// Sleep waits d on this clock, or until ctx is done, and then returns
	// ctx's error.
	Sleep(ctx context.Context, d time.Duration) error
}

// DeadlineClock is a Clock that can also bound a context by its own time,
// as context.WithTimeoutCause does for the wall clock. The auctioneer uses
// it where a clock offers it, so that a transport sees ctx.Deadline (a
// libp2p stream takes it as its deadline); otherwise it bounds the context
// with a goroutine sleeping on Clock.Sleep.
type DeadlineClock interface {
	Clock
	WithTimeoutCause(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc)
}

// Wall is the wall clock.
var Wall DeadlineClock = wallClock{}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (wallClock) WithTimeoutCause(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, cause)
}

// withTimeout bounds ctx by d on c; context.Cause of the result is cause
// once d has passed. cancel releases everything, and returns only once the
// goroutine it may have started has exited.
func withTimeout(c Clock, ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	if dc, ok := c.(DeadlineClock); ok {
		return dc.WithTimeoutCause(ctx, d, cause)
	}
	ctx, stop := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if c.Sleep(ctx, d) == nil {
			stop(cause)
		}
	}()
	return ctx, func() { stop(context.Canceled); <-done }
}
