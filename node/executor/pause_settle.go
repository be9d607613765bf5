package executor

import (
	"context"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
)

// The engine records a pause or an unpause twice: when the call returns,
// and again when containerd's event for it is handled, later and in order.
// An event left over from the change before can therefore flip the flag
// back for a moment: an unpause right after a pause (as Adopt does, to
// attach to a frozen container) may leave the engine saying "running" for
// a container that is frozen, and a Resume in that moment is refused as
// "not paused". The flag settles once the queued events are handled, so a
// refusal of that kind is retried for a short while.
const (
	pauseSettle     = 3 * time.Second
	pauseSettleStep = 50 * time.Millisecond
)

// pauseStateLag reports whether err is the engine refusing a pause or an
// unpause for the state it records, as opposed to any other failure. It
// goes by the message: engines answer "is already paused" with 409 but
// "is not paused" with a plain 500 (Docker 20.10), so the status alone
// does not tell.
func pauseStateLag(err error) bool {
	if err == nil || cerrdefs.IsNotFound(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "is not paused") || strings.Contains(msg, "is already paused")
}

// untilPauseSettles runs op, and runs it again while it fails with
// pauseStateLag, for at most pauseSettle.
func untilPauseSettles(ctx context.Context, op func(context.Context) error) error {
	deadline := time.Now().Add(pauseSettle)
	for {
		err := op(ctx)
		if !pauseStateLag(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pauseSettleStep):
		}
	}
}
