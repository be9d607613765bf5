package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
)

// A gang of 3 on 3 providers, on real daemons under Docker: each member
// (the demo job's gang mode) listens on its own entry of
// GLEANER_GANG_PEERS, sends 1 MiB to every rank through the other
// entries and checks the digest each sends back. The containers have no
// network but their loopback: everything crosses between them through
// their providers' libp2p connections, so the gang completes only if the
// forwarding works every way.
func TestGangMembersExchangeThroughTheirProviders(t *testing.T) {
	buildGangImage(t)
	ps := []*rnode{provider(t, "p1", "1xRTX4090"), provider(t, "p2", "1xRTX4090"), provider(t, "p3", "1xRTX4090")}
	rn := startRenter(t, ps...)
	all := append(ps[:len(ps):len(ps)], rn)
	spec := fmt.Sprintf("name: exchange\nimage: %s\ncommand: [\"-gang\", \"2m\"]\nresources: {gpus: 1}\ntier: silver\nmax_price: 1.00\n"+
		"duration: {max: 10m}\nallow_simulated: true\nretry: {max_reauctions: 0}\ngang: {members: 3}\n", gangImage)
	path := filepath.Join(t.TempDir(), "exchange.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := rn.cli(t, "job", "submit", path)
	mustOK(t, sub, "job submit gang")
	id := strings.TrimSpace(sub.stdout)
	var j renting.JobRecord
	waitUntil(t, 4*time.Minute, "the gang ends", func() bool {
		j = gangStatus(t, rn, id)
		return renting.Terminal(j.State)
	}, all...)
	if j.State != renting.StateCompleted {
		var logs []string
		for _, m := range j.GangView.MemberJobs {
			logs = append(logs, fmt.Sprintf("rank %d (%s, %s):\n%s", m.Rank, m.Job, m.State, rn.cli(t, "job", "logs", m.Job).stdout))
		}
		t.Fatalf("gang %s ended %s (%s); members:\n%s", id, j.State, j.Error, strings.Join(logs, "\n"))
	}
	for _, m := range j.GangView.MemberJobs {
		want := fmt.Sprintf("gang rank %d: reached all 3 ranks and heard from all", m.Rank)
		if out := rn.cli(t, "job", "logs", m.Job).stdout; !strings.Contains(out, want) {
			t.Errorf("rank %d's log lacks %q:\n%s", m.Rank, want, out)
		}
	}
}
