//go:build unix

package executor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The process executor's job writes its results under $GLEANER_OUTPUTS, a
// directory of its work directory, and CopyOutputs returns them with the
// names Docker's copy gives; a symlink the job leaves there is not
// followed. A job without outputs has none to copy.
func TestProcessOutput(t *testing.T) {
	if err := buildProbe(); err != nil {
		t.Fatal(err)
	}
	p, err := NewProcess("local")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := testSpec(t)
	spec.Command = append([]string{probeBin}, writeArgs("-", "exit", outputFiles)...)
	spec.OutputPath = "/outputs"
	j, err := p.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	if res, err := j.Wait(ctx); err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v; logs %q", res, err, j.Logs().Bytes())
	}
	work := filepath.Join(p.root, spec.JobID)
	var r treeResult
	if err := json.Unmarshal(j.Logs().Bytes()[len(unsafeBanner):], &r); err != nil {
		t.Fatalf("logs %q: %v", j.Logs().Bytes(), err)
	}
	if r.Dir != filepath.Join(work, "outputs") || r.Err != "" {
		t.Fatalf("the job wrote to %q (%s), want %s/outputs", r.Dir, r.Err, work)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(r.Dir, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	checkTree(t, readTree(t, j), outputFiles)
	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Fatalf("work directory survived Remove: %v", err)
	}

	none := testSpec(t)
	none.Command = []string{"/bin/sh", "-c", `test -z "${GLEANER_OUTPUTS+set}"`}
	n, err := p.Start(ctx, none, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, n)
	if res, err := n.Wait(ctx); err != nil || res.ExitCode != 0 {
		t.Fatalf("a job without outputs saw %s: %+v %v", EnvOutputs, res, err)
	}
	if _, err := n.CopyOutputs(ctx); !errors.Is(err, ErrNoOutputs) {
		t.Fatalf("CopyOutputs without an output path: %v, want ErrNoOutputs", err)
	}
}
