package node

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/repo"
)

// lockedBuffer collects a logger's output across goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// copyRepoDir copies every file of a repo with its mode, as `cp -a` of
// the directory would, but the lock (a running daemon holds it).
func copyRepoDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == repo.LockFile {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// A copy of a provider's repo (the same identity.key, its store and its
// instance file, in another directory) started on the same Docker engine
// while the original runs a job leaves that job's container alone: it
// carries the original's instance ID, not the copy's, though the copy's
// store reads its lease as launched, which a restart ends.
func TestACopyOfTheRepoLeavesTheOriginalsJobsAlone(t *testing.T) {
	r := newHostileRig(t, Options{}, nil)
	const job = "copied-repo-job"
	spec := hostileSpec(job, "60s")
	s := r.start(r.lease(job, spec), spec)
	for ev := nextEvent(t, s, "status"); ev.Status != "running"; ev = nextEvent(t, s, "status") {
		if ev.Type == "error" {
			t.Fatalf("start: %+v", ev)
		}
	}
	runs := func(when string) {
		t.Helper()
		cs := containers(t, job)
		if len(cs) != 1 || !strings.HasSuffix(cs[0], " running") {
			t.Fatalf("%s: the original's job containers are %q, want it running", when, cs)
		}
	}
	runs("before the copy starts")

	dir := filepath.Join(t.TempDir(), "copy")
	copyRepoDir(t, r.prov.Repo().Dir, dir)
	rp, err := repo.OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	opts := r.prov.opts
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := New(rp, r.prov.cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(r.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = m.Stop(sctx)
	})
	if m.Host().ID() != r.prov.Host().ID() {
		t.Fatalf("the copy is %s, the original %s: not one identity", m.Host().ID(), r.prov.Host().ID())
	}
	runs("once the copy has started")
	mine, err := r.prov.Repo().Instance()
	if err != nil {
		t.Fatal(err)
	}
	if theirs, err := rp.Instance(); err != nil || theirs == mine {
		t.Fatalf("the copy's instance %q (%v), the original's %q", theirs, err, mine)
	}
	if out := logs.String(); !strings.Contains(out, "another instance made") || !strings.Contains(out, job) {
		t.Errorf("the copy did not say it left another instance's job alone; its warnings:\n%s", out)
	}
	// And the original's job runs on: its renter still hears from it.
	if ev := nextEvent(t, s, "heartbeat"); ev.Type == "error" {
		t.Fatalf("after the copy started: %+v", ev)
	}
	runs("a heartbeat later")
}
