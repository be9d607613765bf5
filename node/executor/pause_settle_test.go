package executor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
)

// A refusal for the engine's recorded state is retried until the state
// settles; any other failure is returned at once.
func TestUntilPauseSettles(t *testing.T) {
	lag := fmt.Errorf("Container abc is not paused: %w", cerrdefs.ErrConflict)
	calls := 0
	err := untilPauseSettles(context.Background(), func(context.Context) error {
		if calls++; calls < 3 {
			return lag
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("after two refusals for a lagging state: err %v after %d calls, want nil after 3", err, calls)
	}

	other := fmt.Errorf("Container abc is not running: %w", cerrdefs.ErrConflict)
	calls = 0
	if err := untilPauseSettles(context.Background(), func(context.Context) error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
		t.Fatalf("a conflict that is not about pausing: err %v after %d calls, want it at once", err, calls)
	}
	boom := errors.New("connection refused")
	calls = 0
	if err := untilPauseSettles(context.Background(), func(context.Context) error { calls++; return boom }); !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("a transport error: err %v after %d calls, want it at once", err, calls)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := untilPauseSettles(ctx, func(context.Context) error { return lag }); !errors.Is(err, lag) {
		t.Fatalf("a state that never settles: %v, want the refusal", err)
	}
	if took := time.Since(start); took > pauseSettle {
		t.Fatalf("gave up after %v, want by the context's end", took)
	}
}

// The engine's own refusals are the ones pauseStateLag recognises: a
// resume of a running container and a second pause.
func TestDockerPauseRefusalsAreRecognised(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := ownedDocker(t, testOwner(t, "p", "one"))
	j := startOn(t, d, testSpec(t, "ignore"))
	waitForLog(t, j, "ready")
	id := j.(*dockerJob).id

	if err := d.cli.ContainerUnpause(ctx, id); !pauseStateLag(err) {
		t.Fatalf("unpause of a running container: %v, want a refusal pauseStateLag recognises", err)
	}
	if err := j.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.cli.ContainerPause(ctx, id); !pauseStateLag(err) {
		t.Fatalf("a second pause: %v, want a refusal pauseStateLag recognises", err)
	}
	if err := j.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
}
