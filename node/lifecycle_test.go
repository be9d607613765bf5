package node

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
)

// storeLog keeps the warnings and errors that say a store was used after
// it closed, or a record was lost.
type storeLog struct {
	mu  sync.Mutex
	bad []string
}

func (l *storeLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *storeLog) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *storeLog) WithGroup(string) slog.Handler                 { return l }

func (l *storeLog) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	if strings.Contains(line, "not saved") || strings.Contains(line, "not recorded") || strings.Contains(line, "database not open") {
		l.mu.Lock()
		l.bad = append(l.bad, line)
		l.mu.Unlock()
	}
	return nil
}

func (l *storeLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.bad...)
}

// running reports whether a goroutine is in fn (e.g. "(*renting.Jobs).run(").
func running(fn string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), fn)
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Stop returns only once the renter's job runners are gone, and none of
// them writes to a store after it closed: here a runner waiting out the
// backoff between two auctions of a job nobody can run.
func TestStopWaitsForJobRunnersBeforeClosingStores(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs := &storeLog{}
	n := startTestNode(t, ctx, "", Options{Logger: slog.New(logs)})
	spec := "name: idle\nimage: busybox\ncommand: [\"true\"]\nresources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\n" +
		"duration: {expected: 1m, max: 5m}\nretry: {max_reauctions: 5}\n"
	j, err := n.renterJobs.Submit([]byte(spec), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events, err := n.renterJobs.Follow(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The second backoff (2 s) has begun: the runner sleeps past Stop.
	for ev := range events {
		if strings.Contains(ev.Note, "retrying in 2s") {
			break
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the job never waited to be auctioned again")
	}
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	if err := n.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if running("node.(*renting.Jobs).run(") {
		t.Fatal("Stop returned while a job runner still runs")
	}
	time.Sleep(2500 * time.Millisecond) // past the backoff: a runner left behind would write now
	if bad := logs.lines(); len(bad) > 0 {
		t.Fatalf("a store was used after Stop closed it:\n%s", strings.Join(bad, "\n"))
	}
}

// A provider stopping while a job runs stops the job, removes its
// container and settles the lease before it closes Docker, node.db and
// ledger.db: after Stop the settlement is in the ledger, the lease is
// recorded as ended, and no container is left.
func TestStoppingProviderSettlesItsRunningJob(t *testing.T) {
	r := newHostileRig(t, Options{}, nil)
	spec := hostileSpec("stopped", "60s")
	lease := r.lease("stopped", spec)
	s := r.start(lease, spec)
	for ev := nextEvent(t, s, "status"); ev.Status != "running"; ev = nextEvent(t, s, "status") {
		if ev.Type == "error" {
			t.Fatalf("start: %+v", ev)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.prov.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	if got := containers(t, "stopped"); len(got) != 0 {
		t.Errorf("containers left after Stop: %v", got)
	}
	st, err := ledger.OpenStore(filepath.Join(r.prov.Repo().Dir, repo.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cid, settled := wire.LeaseCID(lease), 0
	if err := st.Walk(r.prov.Host().ID().String(), 1, 1<<62, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		if e.Type == ledger.TypeSettlement && strings.Contains(string(e.Payload), cid) {
			settled++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if settled != 1 {
		t.Errorf("%d settlements of the running lease in ledger.db after Stop, want 1", settled)
	}
	db, err := store.Open(filepath.Join(r.prov.Repo().Dir, repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	state := providing.RecordState("none")
	_ = db.ForEach(store.BucketLeases, func(k string, v []byte) error {
		if rec, err := providing.ReadRecord(v); err == nil && k == "stopped" {
			state = rec.State
		}
		return nil
	})
	if state != leaseEnded {
		t.Errorf("the lease is %q in node.db after Stop, want %q", state, leaseEnded)
	}
}
