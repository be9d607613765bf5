package executor

import (
	"context"
	"testing"
	"time"
)

// A job created ahead (a reservation waiting for its window) exists as a
// container that does not run until Begin, runs like any other after it,
// and leaves nothing behind when removed without ever beginning.
func TestCreateAheadBeginsLater(t *testing.T) {
	d := needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := testSpec(t, "hello")
	c, err := d.Create(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cs := containersOf(t, d, spec.JobID)
	if len(cs) == 0 || cs[0].State == "running" {
		t.Fatalf("after Create: containers %+v, want one created, not running", cs)
	}
	began := time.Now()
	if err := c.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Begin took %v", time.Since(began))
	res, err := c.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("wait: %+v %v", res, err)
	}
	waitForLog(t, c, "hello from gleaner")
	cleanupJob(t, c)

	never := testSpec(t, "hello")
	n, err := d.Create(ctx, never, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if cs := containersOf(t, d, never.JobID); len(cs) != 0 {
		t.Fatalf("a job created and removed without beginning left %+v", cs)
	}
}
