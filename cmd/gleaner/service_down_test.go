package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

// TestServiceDownSaysWhatItCancels: `service down` of a service with two
// replicas prints, on stderr, each replica as the node cancels it and as
// its provider stops it, then how long the down took; its table shows
// the replicas cancelled, not as they ran before.
func TestServiceDownSaysWhatItCancels(t *testing.T) {
	requireDocker(t)
	requireModelImage(t)
	p1, p2 := provider(t, "p1", "1xRTX4090"), provider(t, "p2", "1xRTX4090")
	for _, p := range []*rnode{p1, p2} {
		mustOK(t, p.cli(t, "offer", "set", "--workloads", "batch,service"), p.name+": offer set --workloads")
	}
	rn := startRenter(t, p1, p2)
	all := []*rnode{p1, p2, rn}
	spec := "name: down\nkind: service\nimage: " + modelimage.Tag + "\n" +
		"service:\n  port: 8000\n  readiness: {path: /health, period: 1s}\n  replicas: {min: 2, max: 2}\n" +
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 1h}\nallow_simulated: true\n"
	file := filepath.Join(t.TempDir(), "service.yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	mustOK(t, rn.cli(t, "service", "up", file), "service up")
	var v services.ServiceView
	waitUntil(t, time.Minute, "both replicas running", func() bool {
		r := rn.cli(t, "service", "status", "down", "--json")
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || len(v.Replicas) != 2 {
			return false
		}
		return v.Replicas[0].State == renting.StateRunning && v.Replicas[1].State == renting.StateRunning
	}, all...)

	r := rn.cli(t, "service", "down", "down")
	mustOK(t, r, "service down")
	for i, rep := range v.Replicas {
		for _, want := range []string{
			fmt.Sprintf("cancelling replica %d of 2 (job %s on provider %s)...", i+1, rep.Job, shortID(rep.Provider)),
			fmt.Sprintf("replica %d of 2 stopped (", i+1),
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("service down's progress lacks %q:\n%s", want, r.stderr)
			}
		}
	}
	if !strings.Contains(r.stderr, "service down: down in ") {
		t.Errorf("service down does not say how long it took:\n%s", r.stderr)
	}
	if strings.Contains(r.stdout, " running ") || strings.Count(r.stdout, " cancelled ") != 2 {
		t.Errorf("service down's table shows the replicas as they were:\n%s", r.stdout)
	}
	t.Logf("stderr:\n%s", r.stderr)
}
