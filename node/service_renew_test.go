package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

// renewService is a one-replica model service whose replicas lease for
// lease (renewed half-way through, renewMargin's cap) and load for 2 s,
// so that a successor runs a while before it is ready. Each completion
// takes 250 ms, so that requests are in flight on the old replica when
// its successor takes over: they must be answered, not cut.
func renewService(name string, lease time.Duration) string {
	return fmt.Sprintf("name: %s\nkind: service\nimage: %s\n"+
		"env: {MODELSERVER_LOAD_DELAY: 2s, MODELSERVER_TTFT: 250ms, MODELSERVER_TOKEN_DELAY: 1ms}\n"+
		"service:\n  port: %d\n  readiness: {path: /health, initial_delay: 1s, period: 1s}\n  replicas: {min: 1, max: 1}\n"+
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: %s}\nallow_simulated: true\n",
		name, modelimage.Tag, modelimage.Port, fmt.Sprintf("%ds", lease/time.Second))
}

// A one-replica service with 60 s leases on two providers, under a steady
// load of plain POSTs (which the gateway may not retry): half-way through
// the lease a successor is bought on the other provider, takes the index
// once ready, and the old job is cancelled before its end, with no
// request failing. The next lease's renewal is then caught mid-way by a
// restart of the renter: the successor kept in the record takes the
// index after the restart, and no second one is bought.
func TestServiceLeaseRenewedBeforeItsEnd(t *testing.T) {
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// 60 s: the successor has the lease's second half, 30 s, to be
	// bought, started and ready, room enough on a loaded 2-core machine
	// (with 30 s leases, one run in nine missed its 15 s).
	const lease = 60 * time.Second
	p1, p2 := serviceSeller(t, ctx), serviceSeller(t, ctx)
	logs := &logBuf{}
	rn := startTestNode(t, ctx, "", Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	for _, p := range []*Node{p1, p2} {
		if err := rn.Host().LibP2P().Connect(ctx, addrInfo(p.Host())); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the providers' offers in the renter's book", func() bool {
		_, _, ok1 := rn.market.Book().Get(p1.Host().ID().String())
		_, _, ok2 := rn.market.Book().Get(p2.Host().ID().String())
		return ok1 && ok2
	})
	t.Cleanup(func() {
		// The renter's log of the service (all of it when the test failed).
		for line := range strings.Lines(logs.String()) {
			if t.Failed() || strings.Contains(line, "service replica renew") {
				t.Log(strings.TrimSpace(line))
			}
		}
	})
	if _, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: renewService("renewed", lease)}); err != nil {
		t.Fatal(err)
	}
	v := waitService(t, rn, "renewed", 60*time.Second, "one ready replica", func(v *services.ServiceView) bool { return readyOn(v, 1) })
	first := v.Replicas[0]
	url := v.URL
	end := time.Unix(leaseOf(t, rn, first.Job).End, 0)

	load := startLoad(4, 0, func(hc *http.Client) error { return completion(hc, url, "") })
	stopLoad := load.stop
	defer stopLoad()

	v = waitService(t, rn, "renewed", lease, "a successor bought for replica 0", func(v *services.ServiceView) bool { return v.Replicas[0].Renewing != "" })
	succ := v.Replicas[0].Renewing
	if left := time.Until(end); left > lease/2+time.Second || left < 0 {
		t.Fatalf("the successor was bought %v before the lease's end, want about %v", left, lease/2)
	}
	bought, state := time.Now(), ""
	v = waitService(t, rn, "renewed", time.Until(end), "the successor ready at replica 0", func(v *services.ServiceView) bool {
		if j, err := rn.renterJobs.Get(succ); err == nil && j.State != state {
			state = j.State
			t.Logf("+%v successor %s: %s %s", time.Since(bought).Round(time.Millisecond), succ, j.State, j.Error)
		}
		return v.Replicas[0].Job == succ && readyOn(v, 1)
	})
	t.Logf("+%v the successor took the index", time.Since(bought).Round(time.Millisecond))
	second := v.Replicas[0]
	waitFor(t, time.Until(end), "the old job cancelled before its lease's end", func() bool {
		j, err := rn.renterJobs.Get(first.Job)
		return err == nil && j.State == renting.StateCancelled
	})
	took := time.Until(end)
	time.Sleep(2 * time.Second) // load across the old job's cancel
	stopLoad()
	if n := load.failed.Load(); n > 0 || load.sent.Load() < 50 {
		t.Fatalf("%d of %d plain POSTs through the gateway failed across the renewal (last: %v)", n, load.sent.Load(), load.lastErr.Load())
	}
	t.Logf("%d plain POSTs, none failed; the old job cancelled %v before its lease's end", load.sent.Load(), took.Round(time.Millisecond))
	if second.Provider == first.Provider {
		t.Fatalf("the successor runs on %s, the old replica's provider", second.Provider)
	}
	if v.Renewed != 1 || v.Replaced != 0 || !strings.Contains(second.Note, "renews "+first.Job) {
		t.Fatalf("renewed %d, replaced %d, note %q", v.Renewed, v.Replaced, second.Note)
	}
	// The log says why the successor was bought.
	if l := logs.String(); !strings.Contains(l, "service replica renewing") || !strings.Contains(l, "successor="+succ) || !strings.Contains(l, "renewed 30s ahead") {
		t.Fatalf("the renter's log does not say why %s was bought", succ)
	}

	// The second lease's renewal, caught by a restart of the renter once
	// its successor runs (it needs 2 s more to be ready).
	end2 := time.Unix(leaseOf(t, rn, second.Job).End, 0)
	v = waitService(t, rn, "renewed", lease, "a successor for the second lease, running", func(v *services.ServiceView) bool {
		if v.Replicas[0].Renewing == "" {
			return false
		}
		j, err := rn.renterJobs.Get(v.Replicas[0].Renewing)
		return err == nil && j.State == renting.StateRunning
	})
	third := v.Replicas[0].Renewing
	rn = restartRenter(t, ctx, rn, p1, p2)
	// The successor needs 2 s to load after it runs, and the restart takes
	// less: the restarted renter finds the renewal half done.
	if v, err := rn.renterServices.View("renewed", false); err != nil || v.Replicas[0].Job != second.Job || v.Replicas[0].Renewing != third {
		t.Fatalf("after the restart: %+v, want replica 0 %s renewing with %s (%v)", v, second.Job, third, err)
	}
	v = waitService(t, rn, "renewed", time.Until(end2), "the kept successor at replica 0 after the restart", func(v *services.ServiceView) bool {
		return v.Replicas[0].Job == third && readyOn(v, 1)
	})
	if err := gatewayGet(url + "/health"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Until(end2), "the second job cancelled before its lease's end", func() bool {
		j, err := rn.renterJobs.Get(second.Job)
		return err == nil && j.State == renting.StateCancelled
	})
	var jobs int
	for _, j := range rn.renterJobs.Siblings("") {
		if j.Service == "renewed" {
			jobs++
		}
	}
	if jobs != 3 || v.Renewed != 2 || v.Replicas[0].Provider != first.Provider {
		t.Fatalf("%d jobs bought (want 3), renewed %d, the third on %s", jobs, v.Renewed, v.Replicas[0].Provider)
	}
	if _, err := serviceAPIOf(rn).Down(ctx, services.ServiceNameParams{Name: "renewed"}); err != nil {
		t.Fatal(err)
	}
}

// logBuf is a node's log, kept for the test to read.
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
