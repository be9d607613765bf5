package p2p

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	ma "github.com/multiformats/go-multiaddr"
)

var (
	lan0  = net.Interface{Index: 1001, Name: "lan0", Flags: net.FlagUp | net.FlagMulticast}
	lan1  = net.Interface{Index: 1002, Name: "lan1", Flags: net.FlagUp | net.FlagMulticast}
	down0 = net.Interface{Index: 1003, Name: "down0", Flags: net.FlagMulticast}
	lo    = net.Interface{Index: 1, Name: "lo", Flags: net.FlagUp | net.FlagLoopback}
)

func fakeIPs(ifi net.Interface) []string {
	return map[string][]string{"lan0": {"10.1.2.3"}, "lan1": {"10.9.0.1", "fd00::1"}}[ifi.Name]
}

func TestPlanMDNS(t *testing.T) {
	tcp := ma.StringCast("/ip4/10.1.2.3/tcp/4030")
	for _, tc := range []struct {
		name   string
		listen []ma.Multiaddr
		ifaces []net.Interface
		want   error
		desc   []string
	}{
		{"not listening yet", nil, []net.Interface{lan0}, errMDNSNoAddrs, nil},
		{"unspecified only", []ma.Multiaddr{ma.StringCast("/ip4/0.0.0.0/tcp/4030")}, []net.Interface{lan0}, errMDNSNoAddrs, nil},
		{"relay only", []ma.Multiaddr{ma.StringCast("/p2p-circuit")}, []net.Interface{lan0}, errMDNSNoAddrs, nil},
		{"no multicast interface", []ma.Multiaddr{tcp}, []net.Interface{lo, down0}, errMDNSNoMulticast, nil},
		{"lan", []ma.Multiaddr{tcp}, []net.Interface{lo, lan0, down0, lan1}, nil, []string{"lan0 (10.1.2.3)", "lan1 (10.9.0.1, fd00::1)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planMDNS(tc.listen, tc.ifaces, fakeIPs)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if strings.Join(p.ifaces, ";") != strings.Join(tc.desc, ";") {
				t.Fatalf("interfaces = %q, want %q", p.ifaces, tc.desc)
			}
		})
	}
	if !strings.Contains(errMDNSNoMulticast.Error(), "gleaner connect") {
		t.Fatalf("the no-multicast reason must say what to do instead: %v", errMDNSNoMulticast)
	}
	// A container starting (its veth, Docker's bridges) is no new LAN: the
	// plan, and so the running service, stays as it was.
	before, _ := planMDNS([]ma.Multiaddr{tcp}, []net.Interface{lan0}, fakeIPs)
	veth := net.Interface{Index: 2001, Name: "veth1a2b3c", Flags: net.FlagUp | net.FlagMulticast}
	bridge := net.Interface{Index: 2002, Name: "br-5f0c2e", Flags: net.FlagUp | net.FlagMulticast}
	docker0 := net.Interface{Index: 2003, Name: "docker0", Flags: net.FlagUp | net.FlagMulticast}
	after, _ := planMDNS([]ma.Multiaddr{tcp}, []net.Interface{lan0, veth, bridge, docker0}, fakeIPs)
	if before.key != after.key || len(after.ifaces) != 1 {
		t.Fatalf("container interfaces changed the plan: %q -> %q (%q)", before.key, after.key, after.ifaces)
	}
	a, _ := planMDNS([]ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/1")}, []net.Interface{lan0}, fakeIPs)
	b, _ := planMDNS([]ma.Multiaddr{tcp}, []net.Interface{lan0}, fakeIPs)
	if !a.loopbackOnly() || b.loopbackOnly() {
		t.Fatalf("loopbackOnly: 127.0.0.1 %v, 10.1.2.3 %v", a.loopbackOnly(), b.loopbackOnly())
	}
}

// unlistenedHost is a real libp2p host as New holds it before Listen: the
// moment at which issue 15's daemons started mDNS.
func unlistenedHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.NoListenAddrs, libp2p.DisableRelay(), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// The root cause, pinned: libp2p's service refuses such a host, and before
// the runner that error disabled mDNS for the life of the node.
func TestLibp2pMDNSRefusesUnlistenedHost(t *testing.T) {
	svc := mdns.NewMdnsService(unlistenedHost(t), "gleaner-mdnstest", nil)
	err := svc.Start()
	_ = svc.Close()
	if err == nil || !strings.Contains(err.Error(), "didn't find any IP addresses") {
		t.Fatalf("Start on a host without listen addresses: %v; the runner's reason for waiting is gone, revisit mdns.go", err)
	}
}

type fakeService struct{ closed atomic.Bool }

func (f *fakeService) Close() error { f.closed.Store(true); return nil }

// fakeMDNS records the services a runner starts, on interfaces the test
// chooses, so that the runner's decisions are observable without multicast.
type fakeMDNS struct {
	mu      sync.Mutex
	started []*fakeService
	ifaces  []net.Interface
}

func (f *fakeMDNS) start() (io.Closer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &fakeService{}
	f.started = append(f.started, s)
	return s, nil
}

func (f *fakeMDNS) list() ([]net.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]net.Interface(nil), f.ifaces...), nil
}

func (f *fakeMDNS) setIfaces(ifs ...net.Interface) { f.mu.Lock(); f.ifaces = ifs; f.mu.Unlock() }

func (f *fakeMDNS) services() []*fakeService {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeService(nil), f.started...)
}

func newFakeRunner(t *testing.T, h host.Host, f *fakeMDNS, poll, recheck time.Duration) (*mdnsRunner, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	r := &mdnsRunner{h: h, service: "gleaner-mdnstest", log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		start: f.start, ifaces: f.list, addrsOf: fakeIPs, poll: poll, recheck: recheck}
	if err := r.begin(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, logs
}

// The case that used to disable mDNS: started before the host listens. The
// runner must wait, then start as soon as Listen gives it an address. Its
// poll is an hour, so only the address event can have woken it.
func TestMDNSStartsWhenHostListens(t *testing.T) {
	h := unlistenedHost(t)
	f := &fakeMDNS{ifaces: []net.Interface{lo, lan0}}
	r, logs := newFakeRunner(t, h, f, time.Hour, time.Hour)
	eventually(t, 2*time.Second, "the runner's first look", func() bool { _, _, why := r.mdnsStatus(); return why != nil })
	if running, _, why := r.mdnsStatus(); running || !errors.Is(why, errMDNSNoAddrs) || len(f.services()) != 0 {
		t.Fatalf("before Listen: running=%v why=%v started=%d, want waiting for addresses", running, why, len(f.services()))
	}
	if err := h.Network().Listen(ma.StringCast("/ip4/127.0.0.1/tcp/0")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "mdns to start after Listen", func() bool { ok, _, _ := r.mdnsStatus(); return ok })
	if n := len(f.services()); n != 1 {
		t.Fatalf("started %d services, want 1", n)
	}
	if _, ifs, _ := r.mdnsStatus(); strings.Join(ifs, ";") != "lan0 (10.1.2.3)" {
		t.Fatalf("interfaces = %q, want lan0 only (lo has no multicast)", ifs)
	}
	if out := logs.String(); !strings.Contains(out, "mdns on") || !strings.Contains(out, "lan0 (10.1.2.3)") {
		t.Fatalf("the start is not logged with its interfaces:\n%s", out)
	}
}

// A running service is replaced when the interfaces change, and stopped,
// with the reason and the way out logged, when no multicast one is left.
func TestMDNSFollowsInterfaces(t *testing.T) {
	h := unlistenedHost(t)
	if err := h.Network().Listen(ma.StringCast("/ip4/127.0.0.1/tcp/0")); err != nil {
		t.Fatal(err)
	}
	f := &fakeMDNS{ifaces: []net.Interface{lan0}}
	r, logs := newFakeRunner(t, h, f, 20*time.Millisecond, 20*time.Millisecond)
	eventually(t, 2*time.Second, "mdns to start", func() bool { ok, _, _ := r.mdnsStatus(); return ok })

	f.setIfaces(lan0, lan1)
	eventually(t, 2*time.Second, "a restart on lan1 appearing", func() bool { return len(f.services()) == 2 })
	if !f.services()[0].closed.Load() {
		t.Fatal("the stale service was not closed")
	}
	f.setIfaces(lo)
	eventually(t, 2*time.Second, "mdns to stop", func() bool { ok, _, _ := r.mdnsStatus(); return !ok })
	if _, _, why := r.mdnsStatus(); !errors.Is(why, errMDNSNoMulticast) || !f.services()[1].closed.Load() {
		t.Fatalf("why = %v, second service closed = %v", why, f.services()[1].closed.Load())
	}
	eventually(t, 2*time.Second, "the reason in the log", func() bool { return strings.Contains(logs.String(), "gleaner connect") })
	time.Sleep(10 * 20 * time.Millisecond) // several more looks, same reason
	if n := strings.Count(logs.String(), "no multicast-capable"); n != 1 {
		t.Fatalf("the reason is logged %d times, want once however long it lasts:\n%s", n, logs.String())
	}

	f.setIfaces(lan0)
	eventually(t, 2*time.Second, "mdns to come back", func() bool { ok, _, _ := r.mdnsStatus(); return ok })
}

// syncBuffer is a bytes.Buffer the runner's goroutine may write while the
// test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
