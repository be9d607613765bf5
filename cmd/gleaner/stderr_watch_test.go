package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// stderrWatch is a started command whose stderr is read line by line:
// reached is closed at the first line containing its marker, done once
// stderr has ended.
type stderrWatch struct {
	cmd     *exec.Cmd
	reached chan struct{}
	done    chan struct{}

	mu    sync.Mutex // guards lines
	lines strings.Builder
}

// startWatching starts cmd (its stdout discarded, GLEANER_REPO unset) and
// watches its stderr for marker. The process is killed when the test ends.
func startWatching(t *testing.T, cmd *exec.Cmd, marker string) *stderrWatch {
	t.Helper()
	cmd.Env = append(os.Environ(), "GLEANER_REPO=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	w := &stderrWatch{cmd: cmd, reached: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			w.mu.Lock()
			w.lines.WriteString(sc.Text() + "\n")
			w.mu.Unlock()
			if !once && strings.Contains(sc.Text(), marker) {
				once = true
				close(w.reached)
			}
		}
	}()
	return w
}

// String is the stderr read so far.
func (w *stderrWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines.String()
}

// waitReached fails the test unless the marker is seen within limit.
func (w *stderrWatch) waitReached(t *testing.T, limit time.Duration, what string) {
	t.Helper()
	select {
	case <-w.reached:
	case <-time.After(limit):
		t.Fatalf("%s: not within %v:\n%s", what, limit, w.String())
	}
}
