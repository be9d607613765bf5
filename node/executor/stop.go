package executor

import (
	"context"
	"time"
)

// stopWithNotice is the preemption protocol both executors share: term
// (SIGTERM), up to notice for the job to exit by itself, then kill
// (SIGKILL), marking the result killed. It returns once the job is done.
// No notice (zero or less) kills at once, without SIGTERM: a job that
// escaped its GPUs must not run its handler on them.
func stopWithNotice(ctx context.Context, notice time.Duration, done <-chan struct{}, term, kill func() error, markKilled func()) error {
	if notice > 0 {
		if err := term(); err != nil {
			return err
		}
		timer := time.NewTimer(notice)
		defer timer.Stop()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
	}
	markKilled()
	if err := kill(); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
