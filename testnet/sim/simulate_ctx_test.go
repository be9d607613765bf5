package sim

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A run whose context ends stops at once, in the middle of the market,
// with an *Interrupted naming where it was, and reports no step after.
func TestSimulateContextStopsAtOnce(t *testing.T) {
	o := smallOptions(t)
	o.Days = 7
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	steps := make(chan Step, 1000)
	done := make(chan error, 1)
	go func() {
		_, err := SimulateContext(ctx, o, func(s Step) {
			select {
			case steps <- s:
			default:
			}
		})
		done <- err
	}()
	for s := range steps {
		if s.Part == "market" && s.Market.Now > 2*time.Hour {
			break
		}
	}
	cancel()
	t0 := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the run went on 5 s after its context ended")
	}
	if took := time.Since(t0); took > time.Second {
		t.Errorf("stopped %v after the context ended, want within a second", took)
	}
	var stopped *Interrupted
	if !errors.As(err, &stopped) || !errors.Is(err, context.Canceled) || stopped.Step.Part != "market" {
		t.Fatalf("err %v (%T), want an *Interrupted in the market wrapping context.Canceled", err, err)
	}
	time.Sleep(100 * time.Millisecond)
	for len(steps) > 0 {
		if s := <-steps; s.Part != "market" {
			t.Errorf("a step after the interruption: %+v", s)
		}
	}
}
