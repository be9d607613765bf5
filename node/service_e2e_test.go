package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A service end to end on real nodes and the model server's containers:
// what a team moving an inference endpoint checks on its first day.

// streamThrough posts a streamed completion of n tokens to the gateway at
// url and returns how many chunks came and when the first and the last
// arrived after the request left.
func streamThrough(t *testing.T, url string, n int) (chunks int, first, last time.Duration) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"gleaner-test-model","prompt":"hi","max_tokens":%d,"stream":true}`, n)
	t0 := time.Now()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("streamed completion: status %d, %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if line == "data: [DONE]" {
			done = true
			break
		}
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if chunks++; chunks == 1 {
			first = time.Since(t0)
		}
		last = time.Since(t0)
	}
	if err := sc.Err(); err != nil || !done {
		t.Fatalf("stream cut after %d chunks (%v)", chunks, err)
	}
	return chunks, first, last
}

// One service on three providers: a completion streamed through the
// gateway arrives chunk by chunk; a second renter, a node of its own
// connected to the replica's provider, is refused the first renter's
// replica (which the first renter reaches); load above the autoscale
// target takes the service from 1 to 3 replicas, one per provider, with
// no request failing, and once the load stops it goes back to 1.
func TestServiceStreamsIsolatesAndAutoscales(t *testing.T) {
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	provs := []*Node{serviceSeller(t, ctx), serviceSeller(t, ctx), serviceSeller(t, ctx)}
	rn := renterOf(t, ctx, provs...)
	spec := fmt.Sprintf("name: auto\nkind: service\nimage: %s\n"+
		"env: {MODELSERVER_TOKEN_DELAY: 60ms}\n"+
		"service:\n  port: %d\n  readiness: {path: /health, period: 1s}\n  replicas: {min: 1, max: 3}\n"+
		"  autoscale: {target_qps_per_replica: 2, scale_up_after: 10s, scale_down_after: 10s}\n"+
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 1h}\nallow_simulated: true\n",
		modelimage.Tag, modelimage.Port)
	up, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: spec, WaitS: 60})
	if err != nil {
		t.Fatal(err)
	}
	if up.Up == nil || up.Up.Result != services.UpPlaced || !up.Up.Ready {
		t.Fatalf("service_up with wait_s: %+v, want placed and ready", up.Up)
	}
	// Ready: the URL service_up returned serves at once (the first
	// request below is not retried), not 503 while the model loads.
	url := up.URL

	// Streaming: 8 tokens 60 ms apart. The first chunk must come well
	// before the last is made, or something on the way buffered.
	chunks, first, last := streamThrough(t, url, 8)
	t.Logf("streamed: %d chunks, the first at %v, the last at %v", chunks, first, last)
	if chunks < 9 || last-first < 300*time.Millisecond {
		t.Fatalf("%d chunks, the first at %v, the last at %v: not passed through as made", chunks, first, last)
	}
	v := waitService(t, rn, "auto", 60*time.Second, "one ready replica", func(v *services.ServiceView) bool { return readyOn(v, 1) })

	// Another renter's node, connected to the replica's provider, asks
	// for the replica's stream: refused, while the first renter's works.
	pid, err := peer.Decode(v.Replicas[0].Provider)
	if err != nil {
		t.Fatal(err)
	}
	var prov *Node
	for _, p := range provs {
		if p.Host().ID() == pid {
			prov = p
		}
	}
	other := renterOf(t, ctx, prov)
	_, err = other.DialService(ctx, pid, v.Replicas[0].Job)
	var se *wire.ServiceError
	if !errors.As(err, &se) || se.Code != wire.ServiceRefused {
		t.Fatalf("a second renter's stream to the first renter's replica: %v, want refused", err)
	}
	conn, err := rn.DialService(ctx, pid, v.Replicas[0].Job)
	if err != nil {
		t.Fatalf("the renter's own stream: %v", err)
	}
	conn.Close()

	// Load: about 10 completions a second (one token, no delay to
	// speak of), five times the target for one replica.
	load := startLoad(2, 150*time.Millisecond, func(hc *http.Client) error {
		resp, err := hc.Post(url+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"gleaner-test-model","prompt":"hi","max_tokens":1}`))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	stopLoad := load.stop
	defer stopLoad()
	t0 := time.Now()
	v = waitService(t, rn, "auto", 90*time.Second, "three ready replicas on three providers", func(v *services.ServiceView) bool { return readyOn(v, 3) })
	t.Logf("1 → 3 replicas in %v under %.1f QPS", time.Since(t0).Round(time.Second), float64(v.Stats.QPS))
	stopLoad()
	if n := load.failed.Load(); n > 0 || load.sent.Load() < 50 {
		t.Fatalf("%d of %d completions failed while scaling up (last: %v)", n, load.sent.Load(), load.lastErr.Load())
	}
	if v.Scale != 0 {
		t.Fatalf("the count was fixed (%d), not the autoscaler's", v.Scale)
	}

	// No load: one replica a scale_down_after, back to replicas.min.
	t0 = time.Now()
	v = waitService(t, rn, "auto", 90*time.Second, "back to one replica", func(v *services.ServiceView) bool { return len(v.Replicas) == 1 })
	t.Logf("3 → 1 replicas %v after the load stopped", time.Since(t0).Round(time.Second))
	if err := gatewayGet(url + "/v1/models"); err != nil {
		t.Fatalf("the one replica left does not serve: %v", err)
	}
}

// The floor at work: a service of a silver floor replica and a bronze
// one, on two of three providers, under GETs through the gateway. Both
// owners take their GPUs back (a process of their own on the card): the
// bronze replica is preempted, with notice, the silver floor is not and
// serves every request meanwhile, and the bronze replica is replaced on
// the third provider.
func TestServiceFloorServesWhileBronzeIsPreempted(t *testing.T) {
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	provs := []*Node{serviceSellerWith(t, ctx, 2), serviceSellerWith(t, ctx, 2), serviceSellerWith(t, ctx, 2)}
	byID := map[string]*Node{}
	for _, p := range provs {
		byID[p.Host().ID().String()] = p
	}
	rn := renterOf(t, ctx, provs...)
	spec := strings.Replace(modelService("floored", 2), "  replicas: {min: 2, max: 2}\n",
		"  replicas: {min: 2, max: 2}\n  floor: {tier: silver, replicas: 1}\n", 1)
	if _, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	v := waitService(t, rn, "floored", 60*time.Second, "the floor and a bronze replica ready", func(v *services.ServiceView) bool { return readyOn(v, 2) })
	before := slices.Clone(v.Replicas)
	for i, tier := range []auction.Tier{auction.Silver, auction.Bronze} {
		if l := leaseOf(t, rn, before[i].Job); l.Tier != tier {
			t.Fatalf("replica %d leased at %s, want %s", i, l.Tier, tier)
		}
	}

	url := v.URL
	load := startLoad(1, 100*time.Millisecond, func(*http.Client) error { return gatewayGet(url + "/v1/models") })
	stopClient := load.stop
	defer stopClient()

	// Both owners reclaim their GPUs.
	for _, r := range before {
		sim := byID[r.Provider].GPUSource().(*attest.Simulated)
		if err := sim.SetLoad(0, 60, 200, []attest.Process{{PID: 31337, UsedMiB: 4096, Name: "owner-game"}}); err != nil {
			t.Fatal(err)
		}
	}
	v = waitService(t, rn, "floored", 90*time.Second, "the bronze replica replaced and ready", func(v *services.ServiceView) bool {
		return readyOn(v, 2) && (v.Replicas[1].Job != before[1].Job || v.Replicas[1].Provider != before[1].Provider)
	})
	time.Sleep(time.Second) // the new replica serves beside the floor
	stopClient()
	if n := load.failed.Load(); n > 0 || load.sent.Load() < 20 {
		t.Fatalf("%d of %d GETs through the gateway failed (last: %v)", n, load.sent.Load(), load.lastErr.Load())
	}
	t.Logf("%d GETs through the gateway, none failed; replica 1 now %s on %s (%s)", load.sent.Load(), v.Replicas[1].Job, v.Replicas[1].Provider, v.Replicas[1].Note)
	if v.Replicas[0].Job != before[0].Job {
		t.Fatalf("the silver floor's replica changed: %+v, was %+v", v.Replicas[0], before[0])
	}
	if j, _ := rn.renterJobs.Get(before[0].Job); j.State != renting.StateRunning || j.Provider != before[0].Provider {
		t.Fatalf("the floor's job after its owner's reclaim: %s on %s", j.State, j.Provider)
	}
	if p := v.Replicas[1].Provider; p == before[0].Provider || p == before[1].Provider {
		t.Fatalf("the bronze replica now runs on %s, a provider whose owner took its GPU back", p)
	}
	if j, _ := rn.renterJobs.Get(before[1].Job); v.Replicas[1].Job == before[1].Job && j.Attempts < 2 || !strings.Contains(j.Error+v.Replicas[1].Note, "preempt") {
		t.Fatalf("the bronze replica's job does not say it was preempted: %s, attempts %d, note %q", j.Error, j.Attempts, v.Replicas[1].Note)
	}
}

// leaseOf is the lease a renter's job runs under.
func leaseOf(t *testing.T, rn *Node, id string) *auction.Lease {
	t.Helper()
	j, err := rn.renterJobs.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	l, _, err := auction.DecodeSignedLease(j.Lease, false)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
