package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
)

// Ctrl-C on `job run` stops the following, not the job: the CLI exits 130
// and says which job goes on, in which state, and how to follow or stop
// it (it used to print "job ... running: " and nothing after it).
func TestCtrlCOnJobRunSaysTheJobGoesOn(t *testing.T) {
	requireDocker(t)
	p := provider(t, "provider", "1xRTX4090")
	rn := startRenter(t, p)
	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte(demoSpec("ctrl-c", "silver", "1s", 120, 0)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, "--repo", rn.repo, "job", "run", spec)
	// Wait for the job to run, then press Ctrl-C.
	seen := startWatching(t, cmd, "] running")
	select {
	case <-seen.reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("job run never showed the job running:\n%s\n%s", seen.String(), tails([]*rnode{p, rn}))
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-seen.done
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("job run after Ctrl-C: %v, want exit code %d\n%s", err, exitInterrupted, seen.String())
	}
	out := seen.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-2], "gleaner: interrupted; job ") ||
		!strings.Contains(lines[len(lines)-2], "(state running)") ||
		!strings.HasPrefix(lines[len(lines)-1], "hint: follow it again: gleaner job logs -f ") {
		t.Fatalf("job run after Ctrl-C ends with:\n%s\nwant the job, its state and a hint", out)
	}

	// The job did go on.
	id := strings.Fields(strings.TrimPrefix(lines[len(lines)-2], "gleaner: interrupted; job "))[0]
	rn.waitJob(t, id, 10*time.Second, "the job still running", func(j renting.JobRecord) bool { return j.State == renting.StateRunning }, p, rn)
	mustOK(t, rn.cli(t, "job", "cancel", id), "job cancel")
}
