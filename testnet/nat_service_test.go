package testnet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/gangnet"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

// Issue 37: a service whose replica runs on a home GPU behind a NAT. The
// renter's gateway reaches the container over /gleaner/N/service/1
// streams, which libp2p opens on the relayed connection when it is the
// only path (p2p.Host.LibP2P): from the home renter (cone NAT) to the
// provider behind the symmetric NAT nothing but the relay connects them.

// natServiceCircuit is the relay's per-circuit duration in
// TestNATServiceThroughRelay: an hour in production, seconds here, so
// that the service outlives several circuits within the test.
const natServiceCircuit = 15 // seconds

// TestNATServiceThroughRelay brings a service up from the home renter on
// the provider behind the symmetric NAT, and checks that its gateway
// answers completions with the model server's own text, that the
// replica's provider is reached through the relay only (job_status's
// provider_path and every connection), and that the service keeps
// serving, on the same replica, past several relay circuits: each reset
// breaks every stream of the circuit (the replica's job stream, its
// pings, the gateway's connections), and the renter must dial the
// provider through the relay again rather than give the replica up.
func TestNATServiceThroughRelay(t *testing.T) {
	waitsApart(t)
	requireNATNet(t)
	requireDocker(t)
	requireNATModelImage(t)
	hs := startHomesWith(t, homesOpts{relays: 1, circuitS: natServiceCircuit})
	reachContainers(t, hs.symHome.ns)
	waitSettled(t, hs)
	setServiceOffer(t, hs.symProv)
	waitFor(t, 30*time.Second, "the home renter has the offer", hs.all, func() bool { return hs.homeRenter.book(t)[hs.symProv.peerID] })

	v := startNATService(t, hs, hs.homeRenter, "relayed-chat", symGPU)
	job := v.Replicas[0].Job
	hc := nsHTTPClient(hs.homeRenter.ns)
	if err := completion(hc, v.URL, job, 5); err != nil {
		dumpLogs(t, hs.all)
		t.Fatalf("a completion through the gateway: %v", err)
	}
	var j renting.JobRecord
	if err := hs.homeRenter.call("job_status", node.JobIDParams{ID: job}, &j); err != nil {
		t.Fatal(err)
	}
	if j.Provider != hs.symProv.peerID || j.ProviderPath != p2p.PathRelayed {
		t.Fatalf("the replica runs at %s, path %q; want %s (behind the symmetric NAT) reached through the relay", j.Provider, j.ProviderPath, hs.symProv.peerID)
	}
	out, err := hs.homeRenter.cli("job", "status", job)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "reached through a relay") {
		t.Errorf("`job status` of the replica does not say it is reached through a relay:\n%s", out)
	}

	// Requests for three circuits' lifetimes: GETs (which the gateway
	// retries on a fresh stream when a reset cuts one before its answer)
	// and completions with an Idempotency-Key (the same), from two
	// clients. Every one must be answered by the same replica, whose
	// provider stays reached through the relay only.
	var notes, direct []string
	served, start := 0, time.Now()
	for i := 0; time.Since(start) < 3*natServiceCircuit*time.Second; i++ {
		var err error
		if i%2 == 0 {
			err = models(hc, v.URL, job)
		} else {
			err = completion(hc, v.URL, job, 1+i%7)
		}
		if err != nil {
			dumpLogs(t, hs.all)
			t.Fatalf("request %d, %v after the first: %v (notes so far %q)", i, time.Since(start).Round(time.Millisecond), err, notes)
		}
		served++
		if i%5 == 0 {
			if err := hs.homeRenter.call("job_status", node.JobIDParams{ID: job}, &j); err != nil {
				t.Fatal(err)
			}
			if (j.Error != "" || len(notes) > 0) && (len(notes) == 0 || notes[len(notes)-1] != j.Error) {
				notes = append(notes, j.Error)
			}
			if j.State != renting.StateRunning {
				dumpLogs(t, hs.all)
				t.Fatalf("the replica's job is %s after %v: %s", j.State, time.Since(start).Round(time.Millisecond), j.Error)
			}
			for _, a := range hs.homeRenter.connsTo(t, hs.symProv.peerID) {
				if !strings.Contains(a, "/p2p-circuit") {
					direct = append(direct, a)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d requests served over %v through circuits of %d s; the job's notes on the way: %q", served, time.Since(start).Round(time.Millisecond), natServiceCircuit, notes)
	if len(direct) > 0 {
		t.Errorf("the home renter reached the provider behind the symmetric NAT directly: %v", direct)
	}
	var sv services.ServiceView
	if err := hs.homeRenter.call("service_status", services.ServiceNameParams{Name: "relayed-chat"}, &sv); err != nil {
		t.Fatal(err)
	}
	if len(sv.Replicas) != 1 || sv.Replicas[0].Job != job || sv.Replaced != 0 {
		t.Errorf("the service replaced its replica (replaced %d, replicas %+v); want the first one serving throughout", sv.Replaced, sv.Replicas)
	}
}

// requireNATModelImage builds the model server's image unless it is there.
func requireNATModelImage(t testing.TB) {
	t.Helper()
	if exec.Command("docker", "image", "inspect", modelimage.Tag).Run() == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := modelimage.Build(ctx, ".."); err != nil {
		t.Fatal(err)
	}
}

// setServiceOffer makes d offer its GPUs at a fixed price, for batch jobs
// and services.
func setServiceOffer(t testing.TB, d *natDaemon) {
	t.Helper()
	setHomeOffer(t, d)
	var res node.OfferShowResult
	if err := d.call("offer_set", map[string]any{"workloads": []string{"batch", "service"}}, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Offered {
		t.Fatalf("%s offers nothing: %s", d.name, res.Reason)
	}
}

// natServiceSpec is a one-replica service of the model server on one GPU
// of the given model.
func natServiceSpec(name, model string) string {
	return fmt.Sprintf(`name: %s
kind: service
image: %s
service:
  port: %d
  readiness: {path: /health, period: 1s}
resources: {gpus: 1, models: [%s]}
tier: silver
max_price: 1.00
duration: {max: 1h}
allow_simulated: true
`, name, modelimage.Tag, modelimage.Port, model)
}

// startNATService brings service name up from r on a GPU of model and
// waits until its replica is ready; it returns the service's view.
func startNATService(t testing.TB, hs *homesNet, r *natDaemon, name, model string) *services.ServiceView {
	t.Helper()
	var v services.ServiceView
	if err := r.call("service_up", services.ServiceUpParams{Spec: natServiceSpec(name, model), WaitS: 60}, &v); err != nil {
		t.Errorf("service_up %s: %v", name, err)
		dumpLogs(t, hs.all)
		t.FailNow()
	}
	var raw json.RawMessage
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := r.call("service_status", services.ServiceNameParams{Name: name}, &raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Replicas) == 1 && v.Replicas[0].Ready && v.URL != "" {
			return &v
		}
		if time.Now().After(deadline) {
			// The reason and the status before the daemons' logs: a CI
			// log that keeps only a long failure's head and tail keeps
			// them.
			t.Errorf("service %s: its replica not ready 60 s after service_up returned; service_status: %s", name, raw)
			dumpLogs(t, hs.all)
			t.FailNow()
		}
	}
}

// nsHTTPClient is an HTTP client whose connections are made inside
// network namespace ns (the gateway listens on that namespace's
// loopback). Each socket is made by gangnet.Netns on a locked thread
// moved into ns and back, and is then used from any thread.
func nsHTTPClient(ns string) *http.Client {
	opener := gangnet.Netns("/var/run/netns/" + ns)
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return opener.Dial(ctx, addr)
			},
			MaxIdleConnsPerHost: 8,
		},
	}
}

// completion asks the service at url for n tokens, with an
// Idempotency-Key (the gateway may retry it on another stream), and
// checks the answer is the model server's, from replica job.
func completion(hc *http.Client, url, job string, n int) error {
	body := fmt.Sprintf(`{"model":"gleaner-test-model","prompt":"hello from a home","max_tokens":%d}`, n)
	req, err := http.NewRequest(http.MethodPost, url+"/v1/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", fmt.Sprintf("%d", time.Now().UnixNano()))
	b, err := doFrom(hc, req, job)
	if err != nil {
		return err
	}
	var res struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("not a completion: %v: %s", err, b)
	}
	toks := make([]string, n)
	for i := range toks {
		toks[i] = fmt.Sprintf("tok%d", i)
	}
	if len(res.Choices) != 1 || res.Choices[0].Text != strings.Join(toks, " ") || res.Usage.Completion != n {
		return fmt.Errorf("a completion of %d tokens answered %s", n, b)
	}
	return nil
}

// models lists the service's models and checks the answer names the
// model server's one model.
func models(hc *http.Client, url, job string) error {
	req, err := http.NewRequest(http.MethodGet, url+"/v1/models", nil)
	if err != nil {
		return err
	}
	b, err := doFrom(hc, req, job)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), `"id":"gleaner-test-model"`) {
		return fmt.Errorf("/v1/models answered %s", b)
	}
	return nil
}

// doFrom sends req and returns the body of a 200 answered by replica job.
func doFrom(hc *http.Client, req *http.Request, job string) ([]byte, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: status %d: %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	if got := resp.Header.Get("X-Gleaner-Replica"); got != job {
		return nil, fmt.Errorf("%s %s answered by replica %q, want %s", req.Method, req.URL.Path, got, job)
	}
	return b, nil
}

// natServiceBatch is the requests one iteration of
// BenchmarkNATServiceRequests sends along each path, from
// natServiceClients clients at once.
const (
	natServiceBatch   = 400
	natServiceClients = 4
)

// BenchmarkNATServiceRequests measures a service's requests through its
// gateway along two paths in the same run: from the home renter to a
// replica on the provider behind the symmetric NAT (through the relay:
// the renter's gateway streams to the container over the circuit), and
// from the public renter to a replica on the provider behind the cone NAT
// (direct: the provider dialled out to the public renter). Each request
// is a non-streamed completion of 16 tokens from the model server, with
// no delay of its own, so the path is what is measured;
// natServiceClients clients send natServiceBatch of them per path and
// iteration, the paths taking turns a quarter of the batch at a time,
// after a warm-up of natServiceClients*4 outside the timer.
// It reports requests per second and the median latency on each path,
// and relayed/direct for both.
func BenchmarkNATServiceRequests(b *testing.B) {
	requireNATNet(b)
	requireDocker(b)
	requireNATModelImage(b)
	hs := startHomes(b)
	reachContainers(b, hs.symHome.ns)
	reachContainers(b, hs.coneHome.ns)
	waitSettled(b, hs)
	setServiceOffer(b, hs.symProv)
	setServiceOffer(b, hs.coneProv)
	waitFor(b, 30*time.Second, "the renters have the offers", hs.all, func() bool {
		return hs.homeRenter.book(b)[hs.symProv.peerID] && hs.renter.book(b)[hs.coneProv.peerID]
	})
	type path struct {
		name     string
		renter   *natDaemon
		prov     *natDaemon
		want     string // job_status's provider_path
		url, job string
		hc       *http.Client
		took     time.Duration
		n        int
		lat      []time.Duration
	}
	paths := []*path{
		{name: "relayed", renter: hs.homeRenter, prov: hs.symProv, want: p2p.PathRelayed},
		{name: "direct", renter: hs.renter, prov: hs.coneProv, want: p2p.PathDirect},
	}
	for _, p := range paths {
		gpu := symGPU
		if p.prov == hs.coneProv {
			gpu = coneGPU
		}
		v := startNATService(b, hs, p.renter, "bench-"+p.name, gpu)
		p.url, p.job, p.hc = v.URL, v.Replicas[0].Job, nsHTTPClient(p.renter.ns)
		var j renting.JobRecord
		if err := p.renter.call("job_status", node.JobIDParams{ID: p.job}, &j); err != nil {
			b.Fatal(err)
		}
		if j.Provider != p.prov.peerID || j.ProviderPath != p.want {
			b.Fatalf("%s: the replica runs at %s, path %q; want %s, %s", p.name, j.Provider, j.ProviderPath, p.prov.peerID, p.want)
		}
	}
	// run sends n completions along p from natServiceClients clients;
	// it returns how long they took and each one's latency.
	run := func(p *path, n int) (time.Duration, []time.Duration) {
		lat := make([]time.Duration, n)
		errs := make(chan error, natServiceClients)
		next := make(chan int, n)
		for i := range n {
			next <- i
		}
		close(next)
		start := time.Now()
		var wg sync.WaitGroup
		for range natServiceClients {
			wg.Go(func() {
				for i := range next {
					t0 := time.Now()
					if err := completion(p.hc, p.url, p.job, 16); err != nil {
						errs <- fmt.Errorf("%s request %d: %w", p.name, i, err)
						return
					}
					lat[i] = time.Since(t0)
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		close(errs)
		for err := range errs {
			dumpLogs(b, hs.all)
			b.Fatal(err)
		}
		return took, lat
	}
	for _, p := range paths {
		run(p, natServiceClients*4)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The paths take turns, a quarter of the batch at a time, so
		// that the load of the machine (every daemon shares its CPUs)
		// weighs on both alike.
		for range 4 {
			for _, p := range paths {
				took, lat := run(p, natServiceBatch/4)
				p.took += took
				p.n += natServiceBatch / 4
				p.lat = append(p.lat, lat...)
			}
		}
	}
	b.StopTimer()
	rps, p50 := map[string]float64{}, map[string]float64{}
	for _, p := range paths {
		if got := p.renter.connsTo(b, p.prov.peerID); p.want == p2p.PathRelayed && p.renter.directTo(b, p.prov.peerID) {
			b.Fatalf("the relayed path got a direct connection during the run: %v", got)
		}
		slices.Sort(p.lat)
		rps[p.name] = float64(p.n) / p.took.Seconds()
		p50[p.name] = float64(p.lat[len(p.lat)/2].Microseconds()) / 1e3
		b.ReportMetric(rps[p.name], "req/s-"+p.name)
		b.ReportMetric(p50[p.name], "ms-p50-"+p.name)
	}
	b.ReportMetric(rps["relayed"]/rps["direct"], "req/s-relayed/direct")
	b.ReportMetric(p50["relayed"]/p50["direct"], "p50-relayed/direct")
}
