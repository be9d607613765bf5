package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/services"
)

// `service up` of a service no provider can run (the only provider sells
// batch jobs, not services) exits 1 within seconds naming why, and says
// the service was taken down; --json carries the same outcome in up. A
// replica auctioned again is still being placed when a short --wait
// ends: exit 1, the progress on stderr, and the service kept, with
// `service status` naming the cause. --wait 0 prints the URL at once, as
// service up did before, and status names the cause there too.
func TestServiceUpThatCannotBePlacedExitsNonZero(t *testing.T) {
	p := provider(t, "p", "1xRTX4090") // workloads: batch only
	rn := startRenter(t, p)
	dir := t.TempDir()
	specFile := func(name, extra string) string {
		spec := "name: " + name + "\nkind: service\nimage: gleaner-test/never-pulled:1\n" +
			"service:\n  port: 8000\n  readiness: {path: /health, period: 1s}\n  replicas: {min: 1, max: 1}\n" +
			"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 1h}\nallow_simulated: true\n" + extra
		file := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	nowhere := specFile("nowhere", "")

	// The default wait: the command ends once the replica's no-match is
	// known, not after it.
	began := time.Now()
	r := rn.cli(t, "service", "up", nowhere)
	took := time.Since(began)
	t.Logf("service up: exit %d after %v\n%s", r.code, took.Round(time.Millisecond), r.stderr)
	if r.code != exitFailure || r.stdout != "" || took > 20*time.Second {
		t.Fatalf("service up of a service no provider takes: exit %d after %v, stdout %q; want 1 within seconds, nothing on stdout", r.code, took, r.stdout)
	}
	for _, want := range []string{"waiting up to 5m0s", "service nowhere could not be placed", auction.ReasonWorkload, "gleaner job explain nowhere-", "taken down", "hint: nothing of it is left"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("service up's stderr lacks %q", want)
		}
	}
	if r := rn.cli(t, "service", "status", "nowhere"); r.code == 0 {
		t.Errorf("service status after a failed service up: exit 0\n%s", r.stdout)
	}

	r = rn.cli(t, "service", "up", "--json", "--wait", "30s", nowhere)
	var v services.ServiceView
	if err := json.Unmarshal([]byte(r.stdout), &v); r.code != exitFailure || err != nil || v.Up == nil {
		t.Fatalf("service up --json: exit %d, %v\nstdout %s\nstderr %s", r.code, err, r.stdout, r.stderr)
	}
	if v.Up.Result != services.UpNotPlaced || v.Up.Kept || !strings.Contains(v.Up.Cause, auction.ReasonWorkload) || !strings.Contains(v.NotPlaced, auction.ReasonWorkload) {
		t.Errorf("service up --json: up %+v, not_placed %q", v.Up, v.NotPlaced)
	}
	if !strings.Contains(r.stderr, `"rpc_code":-32024`) {
		t.Errorf("service up --json's error: %s", r.stderr)
	}

	// Auctioned again with backoff: still in auction after 3 s.
	r = rn.cli(t, "service", "up", "--wait", "3s", specFile("retrying", "retry: {max_reauctions: 8}\n"))
	t.Logf("service up --wait 3s: exit %d\n%s", r.code, r.stderr)
	if r.code != exitFailure || r.stdout != "" {
		t.Fatalf("service up --wait 3s: exit %d, stdout %q; want 1", r.code, r.stdout)
	}
	for _, want := range []string{"replica 0 (job retrying-", "): auction", "no replica of service retrying was placed within 3s", auction.ReasonWorkload, "is kept", "gleaner service down retrying", "hint: "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("service up --wait 3s's stderr lacks %q", want)
		}
	}
	r = rn.cli(t, "service", "status", "retrying")
	mustOK(t, r, "service status of the kept service")
	if !strings.Contains(r.stdout, "  not placed: replica 0 (job retrying-") || !strings.Contains(r.stdout, auction.ReasonWorkload) {
		t.Errorf("service status does not say why no replica is placed:\n%s", r.stdout)
	}
	mustOK(t, rn.cli(t, "service", "down", "retrying"), "service down retrying")

	// No wait: the URL at once, exit 0; status names the cause.
	r = rn.cli(t, "service", "up", "--wait", "0", nowhere)
	mustOK(t, r, "service up --wait 0")
	if !strings.HasPrefix(r.stdout, "http://127.0.0.1:") {
		t.Fatalf("service up --wait 0's stdout: %q, want the URL", r.stdout)
	}
	waitUntil(t, 15*time.Second, "service status --json naming why no replica is placed", func() bool {
		r := rn.cli(t, "service", "status", "nowhere", "--json")
		var v services.ServiceView
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &v) == nil && strings.Contains(v.NotPlaced, auction.ReasonWorkload)
	}, p, rn)
	mustOK(t, rn.cli(t, "service", "down", "nowhere"), "service down nowhere")
}
