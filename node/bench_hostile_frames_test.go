package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/replicate"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// Hostile frames: one connected peer opens hundreds of streams on the
// rental protocols and ledger sync, declares on each the largest frame the
// protocol's handler takes and then trickles a byte now and then. Before
// frame buffers grew with the bytes received, every such stream cost the
// node the declared size at once, 12 MiB on job/1 (issue 11: 90 streams
// took a daemon from 62 MB to 1.09 GB of RSS).

// hostileFrameStreams is the attack's size: 60 streams on each of the
// four protocols.
const hostileFrameStreams = 240

// hostileFrameBound is the most the victim's heap may grow under the
// attack: the peer's share of limits.max_memory_mb (512 MiB / 8, see
// p2p's peerMemoryFraction). The resource manager lets about 128 of the
// streams through, 32 per protocol; buffers of the declared sizes would
// take about 400 MiB, 384 of it the 32 job/1 streams at 12 MiB.
const hostileFrameBound = 512 << 20 / 8

// startVictimDaemon starts a whole node (host, stores, market, ledger,
// provider with one simulated GPU, rental protocols, RPC) in this process
// with the default limits, as `gleaner daemon` would.
func startVictimDaemon(t testing.TB) *Node {
	t.Helper()
	cfg := repo.DefaultConfig(repo.NetworkLocal)
	cfg.P2P.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.P2P.MDNS, cfg.P2P.NATTraversal, cfg.P2P.DHTMode = false, false, "server"
	cfg.RPC.Address = "127.0.0.1:0"
	cfg.Provider.SimulateGPUs = "1xRTX4090"
	rp, err := repo.InitRepo(filepath.Join(t.TempDir(), "victim"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(rp, cfg, Options{InProcess: true, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		_ = n.Stop(sctx)
	})
	return n
}

// newBareHost is a host of the local network with nothing on it: a
// hostile peer's client.
func newBareHost(t testing.TB, ctx context.Context) *p2p.Host {
	t.Helper()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	h, err := p2p.New(ctx, p2p.Identity(key), p2p.Network("local"), p2p.DisableNATServices(), p2p.Logger(quietLog),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DHTMode("client"), p2p.DiscoveryInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// hostileFrameTarget is a protocol under attack and the frame length the
// attacker declares on it: the most its handler reads.
type hostileFrameTarget struct {
	proto    protocol.ID
	declared int
}

func hostileFrameTargets(victim *p2p.Host) []hostileFrameTarget {
	return []hostileFrameTarget{
		{victim.ProtocolID(wire.QuoteProto), wire.MaxRequestFrame},
		{victim.ProtocolID(wire.AwardProto), wire.MaxRequestFrame},
		{victim.ProtocolID(wire.JobProto), wire.MaxJobFrame},
		{victim.ProtocolID(replicate.SyncProtocol), replicate.MaxSyncRequest},
	}
}

// hostileFrameResult is what one attack measured.
type hostileFrameResult struct {
	heapDelta  uint64 // peak HeapInuse during the attack minus before it
	rssDelta   uint64 // peak resident set size minus before it
	held       int    // most attack streams the victim held open at once
	reopened   int    // streams the attacker opened again after a reset
	baseHeapIn uint64 // HeapInuse before the attack
}

// heldStreams counts the victim's open streams from peer from on the
// targets.
func heldStreams(victim *p2p.Host, from *p2p.Host, targets []hostileFrameTarget) int {
	n := 0
	for _, c := range victim.LibP2P().Network().ConnsToPeer(from.ID()) {
		for _, s := range c.GetStreams() {
			for _, tg := range targets {
				if s.Protocol() == tg.proto {
					n++
				}
			}
		}
	}
	return n
}

// selfRSS is this process's resident set size, from /proc (0 elsewhere).
func selfRSS() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// attackFrames runs the attack from a fresh hostile peer against victim
// for d and measures the victim's process while it runs. The attacker
// holds one small header per stream and writes from one goroutine, so
// that what grows in this process is the victim's.
func attackFrames(t testing.TB, victim *Node, d time.Duration) hostileFrameResult {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	hostile := newBareHost(t, ctx)
	if err := hostile.Connect(ctx, addrInfo(victim.Host())); err != nil {
		t.Fatal(err)
	}
	targets := hostileFrameTargets(victim.Host())

	type attackStream struct {
		s   network.Stream
		tg  hostileFrameTarget
		hdr []byte
	}
	streams := make([]attackStream, hostileFrameStreams)
	open := func(i int) {
		tg := targets[i%len(targets)]
		s, err := hostile.LibP2P().NewStream(ctx, victim.Host().ID(), tg.proto)
		if err != nil {
			streams[i] = attackStream{tg: tg}
			return
		}
		// The header and the first payload byte go at once.
		hdr := append(binary.AppendUvarint(nil, uint64(tg.declared)), '{')
		if _, err := s.Write(hdr); err != nil {
			_ = s.Reset()
			streams[i] = attackStream{tg: tg}
			return
		}
		streams[i] = attackStream{s: s, tg: tg, hdr: hdr}
	}
	defer func() {
		for _, as := range streams {
			if as.s != nil {
				_ = as.s.Reset()
			}
		}
	}()

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := hostileFrameResult{baseHeapIn: before.HeapInuse}
	rss0 := selfRSS()
	for i := range streams {
		open(i)
	}
	// Trickle: every 200 ms one more byte on every stream; a stream the
	// victim reset (its deadline passed, or the resource manager refused
	// it) is opened again, so the attack keeps its full size throughout.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(d)
	var ms runtime.MemStats
	for time.Now().Before(end) {
		<-tick.C
		for i := range streams {
			if streams[i].s == nil {
				open(i)
				res.reopened++
				continue
			}
			if _, err := streams[i].s.Write([]byte{' '}); err != nil {
				_ = streams[i].s.Reset()
				open(i)
				res.reopened++
			}
		}
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > before.HeapInuse {
			res.heapDelta = max(res.heapDelta, ms.HeapInuse-before.HeapInuse)
		}
		if r := selfRSS(); r > rss0 {
			res.rssDelta = max(res.rssDelta, r-rss0)
		}
		res.held = max(res.held, heldStreams(victim.Host(), hostile, targets))
	}
	return res
}

// TestHostileFramesHeapBounded: a whole node under one peer's 240
// trickling max-size frames grows its heap by less than that peer's
// share of max_memory_mb, where buffers of the declared sizes would take
// about 400 MiB; and the peer got enough streams through (three quarters
// of its 128) for that to mean something.
func TestHostileFramesHeapBounded(t *testing.T) {
	victim := startVictimDaemon(t)
	time.Sleep(time.Second) // let the node's own start-up allocations settle
	res := attackFrames(t, victim, 4*time.Second)
	t.Logf("%d streams held at most, %d reopened; heap +%.1f MiB (from %.1f MiB), RSS +%.1f MiB",
		res.held, res.reopened, inMiB(res.heapDelta), inMiB(res.baseHeapIn), inMiB(res.rssDelta))
	if res.held < 96 {
		t.Fatalf("the victim held only %d attack streams; the attack did not take place", res.held)
	}
	if res.heapDelta > hostileFrameBound {
		t.Fatalf("heap grew by %.1f MiB under hostile frames, bound %.0f MiB", inMiB(res.heapDelta), inMiB(hostileFrameBound))
	}
}

// BenchmarkHostileFramesRSS reports the victim's heap and RSS growth (the
// worst of the rounds), and the streams it held, under the attack above;
// one round is a 4 s attack. Run it with -benchtime 3x: a buffer the
// first round allocates comes fresh from the OS and costs no RSS until
// written to, while later rounds reuse freed memory that the runtime
// zeroes, which is how a long-running daemon's RSS grows.
func BenchmarkHostileFramesRSS(b *testing.B) {
	victim := startVictimDaemon(b)
	time.Sleep(time.Second)
	var worst hostileFrameResult
	for b.Loop() {
		res := attackFrames(b, victim, 4*time.Second)
		worst.heapDelta = max(worst.heapDelta, res.heapDelta)
		worst.rssDelta = max(worst.rssDelta, res.rssDelta)
		worst.held = max(worst.held, res.held)
	}
	b.ReportMetric(inMiB(worst.heapDelta), "heap-MiB")
	b.ReportMetric(inMiB(worst.rssDelta), "rss-MiB")
	b.ReportMetric(float64(worst.held), "streams-held")
}

func inMiB(n uint64) float64 { return float64(n) / (1 << 20) }
