package testnet

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/p2p"
)

// Bounds for the home network. AutoNAT's first probe waits 15 s after
// start; a relay reservation follows within AutoRelay's 15 s search.
const (
	natSettleBound = 40 * time.Second
	natJobBound    = 2 * time.Minute
)

// relayAddrs is the /p2p-circuit addresses d advertises.
func relayAddrs(info node.InfoResult) []string {
	var out []string
	for _, a := range info.Addrs {
		if strings.Contains(a, "/p2p-circuit") {
			out = append(out, a)
		}
	}
	return out
}

// waitSettled waits until the relay serves, both home providers hold a
// reservation on it and each node's reachability is what its place in
// the network makes it.
func waitSettled(t testing.TB, hs *homesNet) time.Duration {
	t.Helper()
	want := map[*natDaemon]string{
		hs.relay: p2p.ReachPublic, hs.renter: p2p.ReachPublic,
		hs.coneProv: p2p.ReachHolePunch, hs.symProv: p2p.ReachRelayed, hs.homeRenter: p2p.ReachHolePunch,
	}
	if hs.relay2 != nil {
		want[hs.relay2] = p2p.ReachPublic
	}
	if hs.symRenter != nil {
		want[hs.symRenter] = p2p.ReachRelayed
	}
	got := map[*natDaemon]string{}
	settled := false
	defer func() {
		if settled {
			return
		}
		for d, r := range got {
			var ps []node.PeerResult
			_ = d.call("node_peers", nil, &ps)
			t.Logf("%s: %s; peers %+v", d.name, r, ps)
		}
	}()
	took := waitFor(t, natSettleBound, "reachability settled and home providers relayed", hs.all, func() bool {
		ok := true
		for d, w := range want {
			info := d.info(t)
			got[d] = info.Reachability
			if info.Reachability != w {
				ok = false
			}
			if (d == hs.coneProv || d == hs.symProv) && len(relayAddrs(info)) == 0 {
				got[d] += " (no relay address)"
				ok = false
			}
		}
		return ok
	})
	settled = true
	return took
}

// Issue 37: home GPUs behind NAT take part. One network of namespaces:
// a relay and a renter on the public segment, a provider behind a cone
// NAT, a provider behind a symmetric NAT, and a renter behind a cone NAT.
func TestNATHomes(t *testing.T) {
	waitsApart(t)
	requireNATNet(t)
	requireDocker(t)
	hs := startHomes(t)
	took := waitSettled(t, hs)
	t.Logf("reachability settled %v after the last daemon started", took.Round(time.Millisecond))

	setHomeOffer(t, hs.coneProv)
	setHomeOffer(t, hs.symProv)
	for _, r := range []*natDaemon{hs.renter, hs.homeRenter} {
		waitFor(t, 30*time.Second, r.name+" has both home providers' offers", hs.all, func() bool {
			b := r.book(t)
			return b[hs.coneProv.peerID] && b[hs.symProv.peerID]
		})
	}

	t.Run("SymmetricToHomeRenterOverRelay", func(t *testing.T) {
		j := hs.completeOn(t, hs.homeRenter, hs.symProv, "sym-relayed", symGPU)
		conns := hs.homeRenter.connsTo(t, hs.symProv.peerID)
		t.Logf("home renter -> symmetric provider: %v", conns)
		if len(conns) == 0 || hs.homeRenter.directTo(t, hs.symProv.peerID) {
			t.Errorf("the home renter's connections to the provider behind the symmetric NAT are %v; want relayed ones only", conns)
		}
		// job status says so: the renter learns its provider is relayed.
		wantProviderPath(t, hs.homeRenter, j, p2p.PathRelayed)
	})
	t.Run("ConeToHomeRenterHolePunched", func(t *testing.T) {
		j := hs.completeOn(t, hs.homeRenter, hs.coneProv, "cone-punched", coneGPU)
		waitFor(t, 30*time.Second, "a direct connection between the home renter and the cone-NAT provider", hs.all, func() bool {
			return hs.homeRenter.directTo(t, hs.coneProv.peerID)
		})
		t.Logf("home renter -> cone provider: %v", hs.homeRenter.connsTo(t, hs.coneProv.peerID))
		wantProviderPath(t, hs.homeRenter, j, p2p.PathDirect)
	})
	t.Run("SymmetricToPublicRenter", func(t *testing.T) {
		j := hs.completeOn(t, hs.renter, hs.symProv, "sym-public", symGPU)
		// The provider dials a public renter itself: no relay needed.
		conns := hs.renter.connsTo(t, hs.symProv.peerID)
		t.Logf("public renter -> symmetric provider: %v", conns)
		if !hs.renter.directTo(t, hs.symProv.peerID) {
			t.Errorf("the public renter reaches the provider behind the symmetric NAT only through %v", conns)
		}
		wantProviderPath(t, hs.renter, j, p2p.PathDirect)
	})
	// What each node tells its owner: `gleaner doctor`'s nat check and
	// `gleaner id`, in text and JSON, match the node's place.
	t.Run("DoctorAndIDSayTheTruth", func(t *testing.T) {
		for _, tc := range []struct {
			d                       *natDaemon
			verdict, status, fixHas string
		}{
			{hs.relay, p2p.ReachPublic, "pass", ""},
			{hs.renter, p2p.ReachPublic, "pass", ""},
			{hs.coneProv, p2p.ReachHolePunch, "pass", "forward"},
			{hs.homeRenter, p2p.ReachHolePunch, "pass", "forward"},
			{hs.symProv, p2p.ReachRelayed, "warn", "UPnP"},
		} {
			out, _ := tc.d.cli("doctor", "--json") // exits 1 when another check (GPU) fails
			var rep struct {
				Checks []struct{ Name, Status, Detail, Fix string }
			}
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("%s: doctor --json: %v: %s", tc.d.name, err, out)
			}
			found := false
			for _, c := range rep.Checks {
				if c.Name != "nat" {
					continue
				}
				found = true
				t.Logf("%s doctor nat: %s: %s (fix: %s)", tc.d.name, c.Status, c.Detail, c.Fix)
				if c.Status != tc.status || !strings.HasPrefix(c.Detail, tc.verdict+": ") || !strings.Contains(c.Fix, tc.fixHas) {
					t.Errorf("%s: doctor's nat check %+v; want %s, %q..., a fix with %q", tc.d.name, c, tc.status, tc.verdict, tc.fixHas)
				}
				if tc.verdict != p2p.ReachPublic && !strings.Contains(c.Detail, "a relay holds a slot") {
					t.Errorf("%s: doctor does not say a relay holds a slot: %s", tc.d.name, c.Detail)
				}
			}
			if !found {
				t.Errorf("%s: doctor has no nat check: %s", tc.d.name, out)
			}
			if got := tc.d.info(t).Reachability; got != tc.verdict {
				t.Errorf("%s: gleaner id --json says %q, want %q", tc.d.name, got, tc.verdict)
			}
			text, err := tc.d.cli("id")
			meaning, _ := p2p.ReachabilityMeaning(tc.verdict)
			if err != nil || !strings.Contains(string(text), "reachability:  "+tc.verdict+": "+meaning) {
				t.Errorf("%s: gleaner id: %v\n%s", tc.d.name, err, text)
			}
		}
	})
	// The control: without the relay, the home renter cannot reach the
	// provider behind the symmetric NAT at all, so what passed above went
	// through the relay.
	t.Run("NoRelayNoJob", func(t *testing.T) {
		hs.relay.kill()
		j, _ := runJob(t, hs.homeRenter, natJobSpec("sym-no-relay", symGPU, "-sleep", "500ms"), natJobBound, hs.all)
		if j.State == renting.StateCompleted {
			t.Fatalf("a job reached the provider behind the symmetric NAT with the relay down: %+v", j)
		}
		t.Logf("with the relay down the job ends %s: %s", j.State, j.Error)
	})
}

// BenchmarkNATJob measures, on the emulated home network, a one-GPU job
// from submit to completed along three paths in the same run: the home
// renter to the provider behind the symmetric NAT (through the relay),
// the home renter to the provider behind the cone NAT (hole-punched,
// direct), and the public renter to the provider behind the symmetric
// NAT (direct: the provider dials out). Each path runs one warm-up job
// first, outside the timer. It reports each path's ms/job, the relayed
// path as a ratio to the hole-punched one (relay/direct), the settle
// time (every verdict right and both home providers holding a relay
// slot, after the last daemon started), the offer's time to a public and
// a home renter's book, and the time from the home renter's first job
// to the cone provider to a direct connection (ms/holepunch).
func BenchmarkNATJob(b *testing.B) {
	requireNATNet(b)
	requireDocker(b)
	hs := startHomes(b)
	// Metrics measured before ResetTimer are reported at the end (it
	// deletes those reported earlier).
	settle := waitSettled(b, hs)
	setHomeOffer(b, hs.coneProv)
	offered := time.Now()
	setHomeOffer(b, hs.symProv)
	offerPublic := waitFor(b, 30*time.Second, "the offers in the public renter's book", hs.all, func() bool {
		bk := hs.renter.book(b)
		return bk[hs.coneProv.peerID] && bk[hs.symProv.peerID]
	})
	waitFor(b, 30*time.Second, "the offers in the home renter's book", hs.all, func() bool {
		bk := hs.homeRenter.book(b)
		return bk[hs.coneProv.peerID] && bk[hs.symProv.peerID]
	})
	offerHome := time.Since(offered)
	var holepunch time.Duration

	type path struct {
		name       string
		renter     *natDaemon
		prov       *natDaemon
		model      string
		total, run time.Duration
	}
	paths := []*path{
		{name: "relayed", renter: hs.homeRenter, prov: hs.symProv, model: symGPU},
		{name: "punched", renter: hs.homeRenter, prov: hs.coneProv, model: coneGPU},
		{name: "public", renter: hs.renter, prov: hs.symProv, model: symGPU},
	}
	job := func(p *path, name string) (time.Duration, time.Duration) {
		waitFree(b, p.renter, p.prov, hs.all)
		start := time.Now()
		j, toRunning := runJob(b, p.renter, natJobSpec(name, p.model, "-sleep", "200ms", "-lines", "200"), natJobBound, hs.all)
		if j.State != renting.StateCompleted || j.Provider != p.prov.peerID {
			b.Fatalf("%s job ended %s at %s: %s", p.name, j.State, j.Provider, j.Error)
		}
		return time.Since(start), toRunning
	}
	for _, p := range paths {
		start := time.Now()
		job(p, p.name+"-warmup")
		if p.name == "punched" {
			waitFor(b, 30*time.Second, "a hole-punched connection", hs.all, func() bool { return hs.homeRenter.directTo(b, hs.coneProv.peerID) })
			holepunch = time.Since(start)
		}
	}
	if hs.homeRenter.directTo(b, hs.symProv.peerID) {
		b.Fatal("the relayed path has a direct connection")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, p := range paths {
			total, run := job(p, fmt.Sprintf("%s-%d", p.name, i))
			p.total += total
			p.run += run
		}
	}
	b.StopTimer()
	for _, p := range paths {
		b.ReportMetric(float64(p.total.Milliseconds())/float64(b.N), "ms/job-"+p.name)
		b.ReportMetric(float64(p.run.Milliseconds())/float64(b.N), "ms/to-running-"+p.name)
	}
	b.ReportMetric(float64(paths[0].total)/float64(paths[1].total), "relay/direct")
	b.ReportMetric(settle.Seconds(), "s/settle")
	b.ReportMetric(float64(offerPublic.Milliseconds()), "ms/offer-public")
	b.ReportMetric(float64(offerHome.Milliseconds()), "ms/offer-home")
	b.ReportMetric(float64(holepunch.Milliseconds()), "ms/holepunch")
}

// waitFree waits until prov runs no lease and renter's book shows its
// GPU unbooked again, so that a measured job does not meet the previous
// one's release.
func waitFree(t testing.TB, renter, prov *natDaemon, ds []*natDaemon) {
	t.Helper()
	waitFor(t, 30*time.Second, prov.name+" free in "+renter.name+"'s book", ds, func() bool {
		var leases []node.LeaseView
		if err := prov.call("lease_list", nil, &leases); err != nil {
			t.Fatal(err)
		}
		for _, l := range leases {
			if l.Active {
				return false
			}
		}
		var res node.MarketOffersResult
		if err := renter.call("market_offers", node.MarketOffersParams{Limit: 1000}, &res); err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Offers {
			if o.Provider == prov.peerID {
				return len(o.Booked) == 0
			}
		}
		return false
	})
}

// relayOf is the relay's peer ID in a /p2p/<relay>/p2p-circuit address.
func relayOf(addr string) string {
	before, _, ok := strings.Cut(addr, "/p2p-circuit")
	if !ok {
		return ""
	}
	return before[strings.LastIndex(before, "/p2p/")+len("/p2p/"):]
}

// Issue 37: a relay killed in the middle of a job. The provider behind
// the symmetric NAT holds slots on two relays, the second found through
// the DHT (it is in no bootstrap list); the home renter's job runs
// through one of them; that relay is killed. The renter loses the job's
// stream, dials the provider again through the other relay, re-attaches,
// and the job completes.
func TestNATRelayLostMidJob(t *testing.T) {
	waitsApart(t)
	requireNATNet(t)
	requireDocker(t)
	hs := startHomesRelays(t, 2)
	waitSettled(t, hs)
	relays := map[string]*natDaemon{hs.relay.peerID: hs.relay, hs.relay2.peerID: hs.relay2}
	took := waitFor(t, 90*time.Second, "the symmetric provider holding slots on both relays", hs.all, func() bool {
		held := map[string]bool{}
		for _, a := range relayAddrs(hs.symProv.info(t)) {
			held[relayOf(a)] = true
		}
		return held[hs.relay.peerID] && held[hs.relay2.peerID]
	})
	t.Logf("slots on both relays %v after settling", took.Round(time.Millisecond))
	setHomeOffer(t, hs.symProv)
	waitFor(t, 30*time.Second, "the home renter has the offer", hs.all, func() bool { return hs.homeRenter.book(t)[hs.symProv.peerID] })

	var j renting.JobRecord
	if err := hs.homeRenter.call("job_submit", node.JobSubmitParams{Spec: natJobSpec("relay-lost", symGPU, "-sleep", "20s", "-lines", "20")}, &j); err != nil {
		t.Fatal(err)
	}
	waitFor(t, natJobBound, "the job running", hs.all, func() bool {
		if err := hs.homeRenter.call("job_status", node.JobIDParams{ID: j.ID}, &j); err != nil {
			t.Fatal(err)
		}
		return j.State == renting.StateRunning
	})
	var used *natDaemon
	for _, a := range hs.homeRenter.connsTo(t, hs.symProv.peerID) {
		if r := relays[relayOf(a)]; r != nil {
			used = r
		}
	}
	if used == nil {
		t.Fatalf("the job runs over no relay: %v", hs.homeRenter.connsTo(t, hs.symProv.peerID))
	}
	t.Logf("the job runs through %s; killing it", used.name)
	used.kill()
	killed := time.Now()

	var notes []string
	waitFor(t, natJobBound, "the job ended", hs.all, func() bool {
		if err := hs.homeRenter.call("job_status", node.JobIDParams{ID: j.ID}, &j); err != nil {
			t.Fatal(err)
		}
		if j.Error != "" && (len(notes) == 0 || notes[len(notes)-1] != j.Error) {
			notes = append(notes, j.Error)
		}
		return ended(j.State) || j.State == renting.StateCancelled
	})
	t.Logf("ended %v after the kill; notes on the way: %q", time.Since(killed).Round(time.Millisecond), notes)
	if j.State != renting.StateCompleted || j.Provider != hs.symProv.peerID {
		dumpLogs(t, hs.all)
		t.Fatalf("job ended %s at %s: %s", j.State, j.Provider, j.Error)
	}
	conns := hs.homeRenter.connsTo(t, hs.symProv.peerID)
	t.Logf("home renter -> symmetric provider after the kill: %v", conns)
	for _, a := range conns {
		if relayOf(a) == used.peerID {
			t.Errorf("still connected through the killed relay: %v", conns)
		}
	}
	var logs node.JobLogsResult
	if err := hs.homeRenter.call("job_logs", node.JobIDParams{ID: j.ID}, &logs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.Logs, "job finished") {
		t.Errorf("the renter's logs lack the job's end:\n%s", logs.Logs)
	}
}

// completeOn runs a short job on gpu from renter r and fails the test
// unless it completed on prov's simulated GPUs.
func (hs *homesNet) completeOn(t *testing.T, r, prov *natDaemon, name, gpu string) renting.JobRecord {
	t.Helper()
	// The subtests run jobs seconds apart, two of them on the symmetric
	// provider with one between: a job there must find the GPU the
	// earlier one freed shown free, which a provider publishes within
	// seconds of its lease's end (node/offers' freedGap), not only when
	// its next booking change is due.
	j, _ := runJob(t, r, natJobSpec(name, gpu, "-sleep", "500ms"), natJobBound, hs.all)
	if j.State != renting.StateCompleted || j.Provider != prov.peerID || !j.Simulated {
		dumpLogs(t, hs.all)
		t.Fatalf("job ended %+v", j)
	}
	return j
}

// wantProviderPath fails unless r's job_status for j says its provider is
// reached by path: what a renter reads to learn it is relayed.
func wantProviderPath(t *testing.T, r *natDaemon, j renting.JobRecord, path string) {
	t.Helper()
	if err := r.call("job_status", node.JobIDParams{ID: j.ID}, &j); err != nil || j.ProviderPath != path {
		t.Errorf("job status says the provider path is %q (%v); want %q", j.ProviderPath, err, path)
	}
}
