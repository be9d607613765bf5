package testnet

import (
	"strings"
	"testing"
	"time"
)

// mdnsDiscoveryBound is how long nodes on one LAN may take to find each
// other through mDNS alone. zeroconf queries at once on start and the
// other side answers within milliseconds; the margin is for a loaded CI
// machine starting three daemons.
const mdnsDiscoveryBound = 30 * time.Second

// Issue 15: daemons on --network local with a multicast-capable interface,
// listening on 0.0.0.0, found each other only through `gleaner connect`.
// Here three real daemons on a bridged LAN of network namespaces, with no
// bootstrap list and no connect, must all be connected within the bound,
// each logging the interface it announces on; a fourth, alone in a
// namespace with only lo, must say why it cannot and what to do instead.
func TestMDNSDiscoveryNetns(t *testing.T) {
	requireNetns(t)
	bin := gleanerBinary(t)
	prefix, lan := newLAN(t, 3)
	lone := newNetns(t, prefix, "lone")
	dir := t.TempDir()

	var ds []*nsDaemon
	var lastStart time.Time
	for _, ns := range lan {
		lastStart = time.Now()
		ds = append(ds, startNSDaemon(t, bin, ns, dir))
	}
	lonely := startNSDaemon(t, bin, lone, dir)

	took := waitMesh(t, ds, lastStart, mdnsDiscoveryBound)
	t.Logf("mDNS: %d daemons fully connected %v after the last one started", len(ds), took.Round(time.Millisecond))

	for _, d := range ds {
		if log := d.logText(); !strings.Contains(log, "mdns on") || !strings.Contains(log, "eth0 (10.77.0.") {
			t.Errorf("daemon in %s does not log the interface it announces on:\n%s", d.ns, log)
		}
	}
	if log := lonely.logText(); !strings.Contains(log, "no multicast-capable network interface") || !strings.Contains(log, "gleaner connect") {
		t.Errorf("the daemon without a multicast interface does not say why mDNS is off and what to do:\n%s", log)
	}
	if ps, err := lonely.peers(); err != nil || len(ps) != 0 {
		t.Errorf("the daemon alone in its namespace has peers %v (err %v)", ps, err)
	}
}

// waitMesh polls until every daemon is connected to every other one and
// returns how long that took since start.
func waitMesh(t testing.TB, ds []*nsDaemon, start time.Time, bound time.Duration) time.Duration {
	t.Helper()
	var missing []string
	for time.Since(start) < bound {
		missing = missing[:0]
		for _, d := range ds {
			ps, err := d.peers()
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range ds {
				if o != d && !ps[o.peerID] {
					missing = append(missing, d.ns+" -> "+o.ns)
				}
			}
		}
		if len(missing) == 0 {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range ds {
		t.Logf("log of %s:\n%s", d.ns, d.logText())
	}
	t.Fatalf("after %v, not connected through mDNS: %s", bound, strings.Join(missing, ", "))
	return 0
}

// BenchmarkMDNSDiscovery measures, on a fresh two-node LAN per iteration,
// the time from the second daemon starting to both being connected
// through mDNS alone (ms/discovery; ns/op also counts building the LAN).
func BenchmarkMDNSDiscovery(b *testing.B) {
	requireNetns(b)
	bin := gleanerBinary(b)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		_, lan := newLAN(b, 2)
		dir := b.TempDir()
		first := startNSDaemon(b, bin, lan[0], dir)
		start := time.Now()
		second := startNSDaemon(b, bin, lan[1], dir)
		total += waitMesh(b, []*nsDaemon{first, second}, start, mdnsDiscoveryBound)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/discovery")
}
