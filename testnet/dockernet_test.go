package testnet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
)

// partitionSpec is the job each side's renter runs while the sides are
// apart: the demo workload, run by the provider's process executor (the
// image is not used there, but a spec must name one).
const partitionSpec = `name: partition
image: ` + DemoImage + `
command: ["/demojob", "-sleep", "300ms", "-lines", "2"]
resources: {gpus: 1}
tier: bronze
max_price: 1.00
duration: {expected: 1m, max: 10m}
allow_simulated: true
`

// side is three daemons on one Docker network: two providers selling a
// simulated GPU and a renter.
type side struct {
	net       string
	providers [2]*DockerNode
	renter    *DockerNode
}

func (s *side) nodes() []*DockerNode {
	return []*DockerNode{s.providers[0], s.providers[1], s.renter}
}

// TestLedgerPartitionAcrossDockerNetworksHeals: six `gleaner daemon`s in
// six containers on two Docker bridge networks, A and B, which the engine
// keeps apart; one container of A (the bridge) is plugged into B too, so
// the testnet starts whole. The bridge is unplugged: 3+3. While apart each
// side's renter runs jobs on its own side's providers, so four providers
// and two renters append (leases, settlements, outcomes, ...), and neither
// side sees the other's new entries. Then the cable goes back in and the
// bridge dials one node across: every node must hold identical heads
// within 10 s, and the far side must hold every entry of every feed.
func TestLedgerPartitionAcrossDockerNetworksHeals(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	d, err := NewDockerNet(ctx, "..", DockerNetOptions{Files: map[string]string{"/spec.yaml": partitionSpec}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	t.Logf("image %s built in %v", d.Prefix, time.Since(t0).Round(time.Millisecond))

	a, b := &side{}, &side{}
	sides := []*side{a, b}
	for i, s := range sides {
		if s.net, err = d.AddNetwork(ctx, []string{"a", "b"}[i]); err != nil {
			t.Fatal(err)
		}
	}
	var all []*DockerNode
	t0 = time.Now()
	parallel(t, func(i int) error {
		s, name := sides[i/3], fmt.Sprintf("%c%d", 'a'+i/3, i%3+1)
		var extra []string
		if i%3 < 2 {
			extra = []string{"--simulate-gpus", "1xRTX4090"}
		}
		n, err := d.Start(ctx, name, s.net, extra...)
		if err != nil {
			return err
		}
		if i%3 < 2 {
			s.providers[i%3] = n
			_, err = d.Gleaner(ctx, n, "offer", "set", "--region", "eu/DE", "--price.bronze", "0.4", "--price.silver", "0.7")
			return err
		}
		s.renter = n
		return nil
	}, 6)
	all = append(a.nodes(), b.nodes()...)
	t.Logf("6 daemons ready in %v", time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range all {
				t.Logf("--- %s (%s) ---\n%s", n.Name, n.PeerID, d.Logs(n, 40))
			}
		}
	})
	sideOf := map[string]*side{}
	for _, s := range sides {
		for _, n := range s.nodes() {
			sideOf[n.PeerID] = s
		}
	}
	// Each side a full mesh.
	parallel(t, func(i int) error {
		ns, pair := sides[i/3].nodes(), [][2]int{{1, 0}, {2, 0}, {2, 1}}[i%3]
		return d.Connect(ctx, ns[pair[0]], ns[pair[1]])
	}, 6)

	// Whole: the bridge a1 is on both networks, and every node comes to
	// hold the four providers' hardware claims.
	bridge := a.providers[0]
	if err := d.Attach(ctx, bridge, b.net); err != nil {
		t.Fatal(err)
	}
	if err := d.Connect(ctx, bridge, b.providers[0]); err != nil {
		t.Fatal(err)
	}
	whole := waitHeads(t, ctx, d, all, 20*time.Second, "the whole testnet holds the four hardware claims", func(hs map[string]node.HeadView) bool {
		return len(hs) == 4
	})

	// Partition: the bridge closes its connections across, so that both
	// ends see them end (as after a keepalive timeout; an outage too short
	// for that is another case, see docs/TRUST.md), then its cable to B is
	// pulled. `gleaner disconnect` also keeps those peers away from the
	// bridge for 30 s unless it dials them, as the heal does.
	var peers []node.PeerResult
	if err := d.Call(ctx, bridge, &peers, "peers"); err != nil {
		t.Fatal(err)
	}
	for _, p := range peers {
		if sideOf[p.PeerID] == b {
			if _, err := d.Gleaner(ctx, bridge, "disconnect", p.PeerID); err != nil && !strings.Contains(err.Error(), "not connected") {
				t.Fatal(err)
			}
		}
	}
	if err := d.Detach(ctx, bridge, b.net); err != nil {
		t.Fatal(err)
	}
	eventuallyT(t, 10*time.Second, "no connection across the partition", func() bool {
		crossing := make([]bool, len(all))
		parallel(t, func(i int) error {
			var ps []node.PeerResult
			if err := d.Call(ctx, all[i], &ps, "peers"); err != nil {
				return err
			}
			for _, p := range ps {
				crossing[i] = crossing[i] || sideOf[p.PeerID] != sideOf[all[i].PeerID]
			}
			return nil
		}, len(all))
		return !slices.Contains(crossing, true)
	})
	// The partition is real: neither the bridge nor a node that was never
	// on B can reach B.
	parallel(t, func(i int) error {
		from, to := []*DockerNode{bridge, a.renter}[i], []*DockerNode{b.providers[1], b.renter}[i]
		err := d.Connect(ctx, from, to)
		if err == nil || !strings.Contains(err.Error(), "failed to dial") {
			return fmt.Errorf("%s dialled %s across the partition: %v", from.Name, to.Name, err)
		}
		return nil
	}, 2)

	// Both sides append: each renter runs a job on each provider of its
	// side (pinned, so that no auction reaches for the other side's
	// offers, which it still remembers).
	t0 = time.Now()
	parallel(t, func(i int) error {
		s := sides[i]
		for _, p := range s.providers {
			var j renting.JobRecord
			if err := d.Call(ctx, s.renter, &j, "job", "run", "/spec.yaml", "--provider", p.PeerID); err != nil {
				return err
			}
			if j.State != renting.StateCompleted || j.Provider != p.PeerID || !j.Simulated {
				return fmt.Errorf("job on %s ended %+v", p.Name, j)
			}
		}
		return nil
	}, 2)
	t.Logf("4 jobs run while apart in %v", time.Since(t0).Round(time.Millisecond))
	apart := make([]map[string]node.HeadView, 2)
	for i, s := range sides {
		other := sides[1-i]
		apart[i] = waitHeads(t, ctx, d, s.nodes(), 10*time.Second, fmt.Sprintf("side %c agrees on its new entries", 'A'+i), func(hs map[string]node.HeadView) bool {
			// Each provider journaled a lease and a settlement per job,
			// the renter at least a lease and an outcome per job.
			for _, p := range s.providers {
				if hs[p.PeerID].Seq < whole[p.PeerID].Seq+2 {
					return false
				}
			}
			return hs[s.renter.PeerID].Seq >= 4
		})
		for _, n := range other.nodes() {
			if got, want := apart[i][n.PeerID], whole[n.PeerID]; got != want {
				t.Fatalf("side %c holds %s's head %+v across the partition, want the one before it %+v", 'A'+i, n.Name, got, want)
			}
		}
	}
	// Nothing is left in flight on either side (journal writes are
	// asynchronous): the heads stay put.
	time.Sleep(500 * time.Millisecond)
	want := map[string]node.HeadView{}
	for i, s := range sides {
		again := waitHeads(t, ctx, d, s.nodes(), 5*time.Second, "side heads", func(map[string]node.HeadView) bool { return true })
		if !maps.Equal(again, apart[i]) {
			t.Fatalf("side %c still appending after its jobs: %v then %v", 'A'+i, apart[i], again)
		}
		for _, n := range s.nodes() {
			if h, ok := apart[i][n.PeerID]; ok {
				want[n.PeerID] = h
			}
		}
	}

	// Heal: the cable goes back in and the bridge dials one node of B.
	healStart := time.Now()
	if err := d.Attach(ctx, bridge, b.net); err != nil {
		t.Fatal(err)
	}
	if err := d.Connect(ctx, bridge, b.providers[0]); err != nil {
		t.Fatal(err)
	}
	connected := time.Since(healStart)
	healed := waitHeads(t, ctx, d, all, 10*time.Second-connected, "identical heads on all six nodes after the heal", func(hs map[string]node.HeadView) bool {
		return maps.Equal(hs, want)
	})
	took := time.Since(healStart)
	t.Logf("healed: all 6 nodes hold identical heads %v after the cable went back in (%v of it to attach and dial); %d feeds, %d entries",
		took.Round(time.Millisecond), connected.Round(time.Millisecond), len(healed), entries(healed))
	if took > 10*time.Second {
		t.Fatalf("convergence took %v, want < 10 s", took)
	}

	// No entry lost: on a node of the other side, every feed is whole
	// (every seq from 1 to the head, chained by prev) and ends at the head
	// its author's side held before the heal.
	parallel(t, func(i int) error {
		author := all[i]
		h, ok := want[author.PeerID]
		if !ok {
			return nil
		}
		far := b.renter
		if sideOf[author.PeerID] == b {
			far = a.renter
		}
		var hist []node.EntryView
		if err := d.Call(ctx, far, &hist, "ledger", "history", "--author", author.PeerID, "--limit", "1000"); err != nil {
			return err
		}
		if uint64(len(hist)) != h.Seq || hist[0].CID != h.CID {
			return fmt.Errorf("%s holds %d entries of %s's feed (%+v), want %d ending at %s", far.Name, len(hist), author.Name, hist, h.Seq, h.CID)
		}
		for k, e := range hist {
			if e.Author != author.PeerID || e.Seq != h.Seq-uint64(k) || (k+1 < len(hist)) != (e.Prev != "") || (k+1 < len(hist) && e.Prev != hist[k+1].CID) {
				return fmt.Errorf("%s's copy of %s's feed is broken at seq %d: %+v", far.Name, author.Name, e.Seq, e)
			}
		}
		return nil
	}, len(all))
}

// waitHeads polls every node's `gleaner ledger heads` (in parallel) until
// all hold identical heads that satisfy ok, and returns them by author.
func waitHeads(t *testing.T, ctx context.Context, d *DockerNet, ns []*DockerNode, limit time.Duration, what string, ok func(map[string]node.HeadView) bool) map[string]node.HeadView {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		views := make([]map[string]node.HeadView, len(ns))
		parallel(t, func(i int) error {
			var hs []node.HeadView
			if err := d.Call(ctx, ns[i], &hs, "ledger", "heads"); err != nil {
				return err
			}
			views[i] = map[string]node.HeadView{}
			for _, h := range hs {
				views[i][h.Author] = h
			}
			return nil
		}, len(ns))
		same := true
		for _, v := range views[1:] {
			same = same && maps.Equal(v, views[0])
		}
		if same && ok(views[0]) {
			return views[0]
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for i, v := range views {
				fmt.Fprintf(&b, "\n%s:", ns[i].Name)
				for _, a := range slices.Sorted(maps.Keys(v)) {
					fmt.Fprintf(&b, " %s…=%d", a[len(a)-6:], v[a].Seq)
				}
			}
			t.Fatalf("%s: not after %v; heads:%s", what, limit, b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func entries(hs map[string]node.HeadView) (n uint64) {
	for _, h := range hs {
		n += h.Seq
	}
	return n
}

// parallel runs f(0..n-1) at once and fails the test with every error.
func parallel(t *testing.T, f func(i int) error, n int) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
