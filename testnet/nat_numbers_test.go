package testnet

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/gleaner-net/gleaner/node"
)

// Issue 37's two missing numbers: a job's data through the relay,
// hole-punched and direct (BenchmarkNATDataFetch), and what a relay
// costs with 100 relayed connections (BenchmarkNATRelay100).

// natFetchSize is one measured fetch: small, so that -benchtime 1x is
// quick, and so that several fit in one circuit's 64 MiB each way (the
// relayed path's fetches may share one circuit).
const natFetchSize = 16 << 20

// addRandomFile writes size random bytes under dir and data_adds them at d.
func addRandomFile(t testing.TB, d *natDaemon, dir string, size int) string {
	t.Helper()
	buf := make([]byte, size)
	_, _ = rand.Read(buf)
	f, err := os.CreateTemp(dir, "fetch-*.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(buf); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	var res node.DataFetchResult
	if err := d.call("data_add", node.DataPathParams{Path: f.Name(), Public: true}, &res); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(f.Name())
	return res.CID
}

// BenchmarkNATDataFetch measures a content-addressed file of
// natFetchSize fetched (data_pin: every block verified and stored) along
// three paths in the same run: the home renter from the provider behind
// the symmetric NAT (through the relay: bitswap is let onto relayed
// connections, p2p/relay_data.go), the home renter from the provider
// behind the cone NAT (hole-punched, direct), and the public renter from
// the provider behind the symmetric NAT (direct: the provider dialled
// out). A 1 MiB fetch on each path first sets the connections up, outside
// the timer. It reports MB/s for each path, relayed/direct and
// punched/direct, direct being the public path. With -benchtime above
// 3x the relayed fetches outgrow one circuit's 64 MiB, and the circuit
// is reset under them (docs/NAT.md).
func BenchmarkNATDataFetch(b *testing.B) {
	requireNATNet(b)
	hs := startHomes(b)
	waitSettled(b, hs)
	type path struct {
		name         string
		renter, prov *natDaemon
		took         time.Duration
		bytes        int64
	}
	paths := []*path{
		{name: "relayed", renter: hs.homeRenter, prov: hs.symProv},
		{name: "punched", renter: hs.homeRenter, prov: hs.coneProv},
		{name: "direct", renter: hs.renter, prov: hs.symProv},
	}
	dir := b.TempDir()
	fetch := func(p *path, c string, timeoutS int) (time.Duration, int64, error) {
		start := time.Now()
		var res node.DataFetchResult
		if err := p.renter.call("data_pin", node.DataCIDParams{CID: c, TimeoutS: timeoutS}, &res); err != nil {
			return 0, 0, err
		}
		took := time.Since(start)
		if !res.Fetched {
			b.Fatalf("%s fetch came from nowhere: %+v", p.name, res)
		}
		var gc node.DataGCResult
		if err := p.renter.call("data_rm", node.DataCIDParams{CID: c}, &gc); err != nil {
			b.Fatal(err)
		}
		return took, res.Bytes, nil
	}
	// The punched path first: its fetch dials the cone provider through
	// the relay and DCUtR punches, which the relayed path's fetch (the
	// same renter) needs no part of.
	for _, p := range []*path{paths[1], paths[2], paths[0]} {
		if p.renter == hs.homeRenter {
			// Through the relay, as the home renter would once the DHT
			// named the provider: the provider's record may not have
			// spread yet, and a fetch that finds no one serving it
			// ends as refused after a second (data.FetchFrom).
			circuit := "/ip4/" + relayIP + "/udp/" + natPort + "/quic-v1/p2p/" + hs.relay.peerID + "/p2p-circuit/p2p/" + p.prov.peerID
			if err := p.renter.call("node_connect", node.ConnectParams{Addr: circuit}, nil); err != nil {
				b.Fatalf("%s: connect through the relay: %v", p.name, err)
			}
		}
		if _, _, err := fetch(p, addRandomFile(b, p.prov, dir, 1<<20), 20); err != nil {
			dumpLogs(b, hs.all)
			b.Fatalf("%s fetch: %v; connections %v", p.name, err, p.renter.connsTo(b, p.prov.peerID))
		}
	}
	waitFor(b, 30*time.Second, "direct connections on the punched and the direct path", hs.all, func() bool {
		return hs.homeRenter.directTo(b, hs.coneProv.peerID) && hs.renter.directTo(b, hs.symProv.peerID)
	})
	if hs.homeRenter.directTo(b, hs.symProv.peerID) {
		b.Fatal("the relayed path has a direct connection")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, p := range paths {
			b.StopTimer()
			c := addRandomFile(b, p.prov, dir, natFetchSize)
			b.StartTimer()
			took, n, err := fetch(p, c, 300)
			if err != nil {
				dumpLogs(b, hs.all)
				b.Fatalf("%s fetch: %v", p.name, err)
			}
			p.took += took
			p.bytes += n
		}
	}
	b.StopTimer()
	if hs.homeRenter.directTo(b, hs.symProv.peerID) {
		b.Fatal("the relayed path got a direct connection during the run")
	}
	mbs := map[string]float64{}
	for _, p := range paths {
		mbs[p.name] = float64(p.bytes) / 1e6 / p.took.Seconds()
		b.ReportMetric(mbs[p.name], "MB/s-"+p.name)
	}
	b.ReportMetric(mbs["relayed"]/mbs["direct"], "relayed/direct")
	b.ReportMetric(mbs["punched"]/mbs["direct"], "punched/direct")
}

// The relay load: relayTargets peers reserve a slot on the relay (at
// most 8 a source address and 16 circuits a peer: the relay's limits),
// relayCircuits peers each open a circuit to one of them and send
// relayMsg bytes every relayEvery, echoed back.
const (
	relayTargets  = 8
	relayCircuits = 100
	// Each dialing peer opens relayPerDialer circuits (to as many
	// targets): one, so that 108 peers hold a connection to the relay,
	// more than the 96 inbound connections libp2p's scaling alone gives
	// at limits.max_memory_mb 512 (a relay admits its reservations and a
	// margin: p2p/relay.go, relayConns).
	relayPerDialer = 1
	relayMsg       = 64
	relayEvery     = time.Second
	relayWindow    = 10 * time.Second
	clientsIP      = 20 // the clients' first address, 11.77.0.20
	clientsPerIP   = 7  // the relay's resource manager admits 8 connections an address
	relayEcho      = protocol.ID("/gleaner-bench/echo/1")
)

// procStat is a process's CPU time (user+system) and resident memory.
func procStat(t testing.TB, pid int) (time.Duration, int64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is field 3,
	// utime 14, stime 15 (clock ticks, 100 a second on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var rss int64
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			rss, _ = strconv.ParseInt(strings.Fields(l)[1], 10, 64)
		}
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, rss * 1024
}

// BenchmarkNATRelay100 measures a relay (a real `gleaner daemon --relay`
// on the emulated home network, with its four peers) carrying 100
// relayed connections: in-process libp2p clients in a namespace of their
// own on the public segment, 8 holding a slot and 100 opening a circuit
// each through the relay to one of those 8 (108 inbound connections at
// the relay, more than libp2p's default scaling admits), a 64-byte echo
// every second on each. It reports the relay's CPU over a 10 s window and
// its RSS, idle (the same network, no clients) and loaded, and the
// difference per circuit.
func BenchmarkNATRelay100(b *testing.B) {
	requireNATNet(b)
	hs := startHomes(b)
	waitSettled(b, hs)
	pid := hs.relay.cmd.Process.Pid
	window := func() (time.Duration, int64) {
		c0, _ := procStat(b, pid)
		time.Sleep(relayWindow)
		c1, rss := procStat(b, pid)
		return c1 - c0, rss
	}
	idleCPU, idleRSS := window()

	ns := hs.net.public(b, "clients", fmt.Sprintf("%s.%d", pubNet, clientsIP))
	nIPs := (relayTargets + relayCircuits/relayPerDialer + clientsPerIP - 1) / clientsPerIP
	for i := 1; i < nIPs; i++ {
		ipRun(b, "-n", ns, "addr", "add", fmt.Sprintf("%s.%d/24", pubNet, clientsIP+i), "dev", "eth0")
	}
	relayAddr := "/ip4/" + relayIP + "/tcp/" + natPort + "/p2p/" + hs.relay.peerID
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run", "^TestNATRelayClients$", "-test.v")
	cmd.Env = append(os.Environ(), "GLEANER_RELAY_CLIENTS="+relayAddr+","+hs.network)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	logf, err := os.Create(filepath.Join(b.TempDir(), "clients.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = logf
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	ready := make(chan string, 1)
	var out strings.Builder
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.HasPrefix(sc.Text(), "READY") {
				ready <- sc.Text()
			}
		}
	}()
	start := time.Now()
	select {
	case l := <-ready:
		b.Logf("%s after %v", l, time.Since(start).Round(time.Millisecond))
	case <-done:
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("the clients exited:\n%s", out.String())
	case <-time.After(90 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("the clients not ready after 90 s:\n%s", out.String())
	}
	var cpu time.Duration
	var rss int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, r := window()
		cpu += c
		rss = max(rss, r)
	}
	b.StopTimer()
	select {
	case <-done:
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("the clients exited during the window:\n%s", out.String())
	default:
	}
	n := float64(b.N)
	b.ReportMetric(idleCPU.Seconds()/relayWindow.Seconds()*100, "cpu%-idle")
	b.ReportMetric(cpu.Seconds()/n/relayWindow.Seconds()*100, "cpu%-100circuits")
	b.ReportMetric((cpu.Seconds()/n-idleCPU.Seconds())/relayWindow.Seconds()*1e3/relayCircuits, "cpu-ms/s-per-circuit")
	b.ReportMetric(float64(idleRSS)/(1<<20), "MiB-rss-idle")
	b.ReportMetric(float64(rss)/(1<<20), "MiB-rss-100circuits")
	b.ReportMetric(float64(rss-idleRSS)/1024/relayCircuits, "KiB-rss-per-circuit")
}

// TestNATRelayClients is BenchmarkNATRelay100's load, run by it in the
// clients' namespace (GLEANER_RELAY_CLIENTS=<relay multiaddr>,<network>);
// skipped otherwise. It prints READY once every circuit has echoed once,
// and keeps the traffic up until its stdin closes.
func TestNATRelayClients(t *testing.T) {
	env := os.Getenv("GLEANER_RELAY_CLIENTS")
	if env == "" {
		t.Skip("run by BenchmarkNATRelay100")
	}
	addr, netName, _ := strings.Cut(env, ",")
	relay, err := peer.AddrInfoFromString(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hello := protocol.ID("/gleaner/" + netName + "/hello/1")
	// Each client dials the relay from one of the namespace's addresses,
	// clientsPerIP of them to an address.
	hosts := 0
	newHost := func(opts ...libp2p.Option) host.Host {
		src := &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("%s.%d", pubNet, clientsIP+hosts/clientsPerIP))}
		hosts++
		dialer := func(ma.Multiaddr) (tcp.ContextDialer, error) { return &net.Dialer{LocalAddr: src}, nil }
		opts = append(opts, libp2p.Transport(tcp.NewTCPTransport, tcp.WithDialerForAddr(dialer)),
			libp2p.ResourceManager(&network.NullResourceManager{}), libp2p.DisableMetrics())
		h, err := libp2p.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		h.SetStreamHandler(hello, func(s network.Stream) { _ = s.Close() })
		return h
	}
	var targets []host.Host
	for i := 0; i < relayTargets; i++ {
		h := newHost(libp2p.ListenAddrStrings("/p2p-circuit"))
		h.SetStreamHandler(relayEcho, func(s network.Stream) { _, _ = io.Copy(s, s); _ = s.Close() })
		if err := h.Connect(ctx, *relay); err != nil {
			t.Fatalf("target %d: %v", i, err)
		}
		if _, err := client.Reserve(ctx, h, *relay); err != nil {
			t.Fatalf("target %d reserve: %v", i, err)
		}
		targets = append(targets, h)
	}
	type circ struct {
		s   network.Stream
		buf []byte
	}
	circs := make([]circ, relayCircuits)
	var wg sync.WaitGroup
	errs := make(chan error, relayCircuits)
	var h host.Host
	for i := range circs {
		if i%relayPerDialer == 0 {
			h = newHost(libp2p.ListenAddrStrings("/p2p-circuit")) // no direct address: the circuits stay
		}
		// Dialer i/relayPerDialer to relayPerDialer consecutive targets:
		// every circuit joins another pair of peers.
		tg := targets[(i/relayPerDialer*relayPerDialer+i%relayPerDialer)%relayTargets]
		ca, _ := ma.NewMultiaddr(relay.Addrs[0].String() + "/p2p/" + relay.ID.String() + "/p2p-circuit")
		if err := h.Connect(ctx, peer.AddrInfo{ID: tg.ID(), Addrs: []ma.Multiaddr{ca}}); err != nil {
			t.Fatalf("circuit %d: %v", i, err)
		}
		s, err := h.NewStream(network.WithAllowLimitedConn(ctx, "bench"), tg.ID(), relayEcho)
		if err != nil {
			t.Fatalf("circuit %d stream: %v", i, err)
		}
		circs[i] = circ{s: s, buf: make([]byte, relayMsg)}
	}
	echo := func(c circ) error {
		if _, err := c.s.Write(c.buf); err != nil {
			return err
		}
		_, err := io.ReadFull(c.s, c.buf)
		return err
	}
	for _, c := range circs {
		if err := echo(c); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("READY %d circuits through %d slots\n", len(circs), len(targets))
	for i, c := range circs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * relayEvery / relayCircuits) // spread over the second
			tk := time.NewTicker(relayEvery)
			defer tk.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
				}
				if err := echo(c); err != nil && ctx.Err() == nil {
					errs <- fmt.Errorf("circuit %d: %w", i, err)
					return
				}
			}
		}()
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	for _, c := range circs {
		_ = c.s.Reset()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
