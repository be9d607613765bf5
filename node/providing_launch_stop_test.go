package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/wire"
)

// A clean stop that comes while a job is being launched: its container
// has started, and it is not yet the lease's job (the window between the
// executor's start and the run taking the job as its own). The stop must
// find it all the same: the job gets the lease's notice, its renter hears
// why, the lease is settled once and ended, and no container runs on
// once Shutdown returns.
func TestAStopWhileAJobIsLaunchingStopsIt(t *testing.T) {
	logs := newLogWatch()
	r := newHostileRig(t, Options{Logger: logs.logger()}, nil)
	inWindow, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.prov.providerJobs.SetLaunchHook(func(string) {
		once.Do(func() {
			close(inWindow)
			select {
			case <-release:
			case <-r.ctx.Done():
			}
		})
	})
	spec := hostileSpec("launching", "120s")
	lease := r.lease("launching", spec)
	s := r.start(lease, spec)
	select {
	case <-inWindow:
	case <-r.ctx.Done():
		t.Fatal("the job never reached the end of its launch")
	}
	if _, state := jobContainer(t, r.prov, "launching"); state != "running" {
		t.Fatalf("in the launch's window the job's container is %q, want running", state)
	}

	// The run is held in the window until Shutdown has looked at the
	// leases: it has returned (without waiting for this job), or it
	// waits for the launch it called off.
	ctx, cancel := context.WithTimeout(r.ctx, time.Minute)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- r.prov.providerJobs.Shutdown(ctx) }()
	calledOff := make(chan struct{})
	go func() {
		if _, ok := logs.await(ctx, "stopping: the jobs being started are called off"); ok {
			close(calledOff)
		}
	}()
	var err error
	select {
	case err = <-stopped:
		close(release)
	case <-calledOff:
		close(release)
		err = <-stopped
	case <-ctx.Done():
		t.Fatal("Shutdown neither returned nor called the launch off")
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, state := jobContainer(t, r.prov, "launching"); state == "running" {
		t.Fatalf("the job launching when the provider stopped still runs after Shutdown returned\n%s", logs.matching("part=provider-jobs"))
	}
	ev := nextEvent(t, s, "exit")
	if ev.Type != "exit" || ev.Status != "preempted" || !strings.Contains(ev.Error, sched.ReasonStopping) {
		t.Fatalf("the renter was told %+v, want preempted: %s", ev, sched.ReasonStopping)
	}
	if got := r.leaseState("launching"); got != leaseEnded {
		t.Fatalf("the lease is %s after the stop, want ended", got)
	}
	if n := r.settlements(wire.LeaseCID(lease)); n != 1 {
		t.Fatalf("%d settlements of the stopped lease, want 1", n)
	}
	waitFor(t, 30*time.Second, "the job's container removed", func() bool { id, _ := jobContainer(t, r.prov, "launching"); return id == "" })
}

// logWatch keeps a node's log lines (message, then key=value), for a
// test to wait for one or look for it.
type logWatch struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced at each line
}

func newLogWatch() *logWatch { return &logWatch{changed: make(chan struct{})} }

func (w *logWatch) logger() *slog.Logger { return slog.New(logWatchHandler{w: w}) }

func (w *logWatch) add(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, line)
	close(w.changed)
	w.changed = make(chan struct{})
}

// find is the first line that holds every one of subs ("" if none), and
// a channel closed at the next line.
func (w *logWatch) find(subs ...string) (string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range w.lines {
		if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
			return line, w.changed
		}
	}
	return "", w.changed
}

// await waits for a line that holds every one of subs, until ctx ends.
func (w *logWatch) await(ctx context.Context, subs ...string) (string, bool) {
	for {
		line, next := w.find(subs...)
		if line != "" {
			return line, true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return "", false
		}
	}
}

// matching is the lines that hold sub, one a line.
func (w *logWatch) matching(sub string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, line := range w.lines {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

type logWatchHandler struct {
	w     *logWatch
	attrs []slog.Attr
}

func (h logWatchHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h logWatchHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.w.add(b.String())
	return nil
}

func (h logWatchHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logWatchHandler{w: h.w, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h logWatchHandler) WithGroup(string) slog.Handler { return h }
