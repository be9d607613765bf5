package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
	ma "github.com/multiformats/go-multiaddr"
)

var modelImageOnce sync.Once
var modelImageErr error

// requireModelImage fails, never skips, without Docker: these tests run
// the model server's real container.
func requireModelImage(t testing.TB) {
	t.Helper()
	modelImageOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		modelImageErr = modelimage.Build(ctx, "..")
	})
	if modelImageErr != nil {
		t.Fatal(modelImageErr)
	}
}

var serviceSeq int

// startModel runs the model server as a service job through the Docker
// executor, owned by a fresh instance ID, and returns it with its address.
func startModel(t testing.TB, env map[string]string) (*executor.Docker, executor.Job, netip.AddrPort) {
	t.Helper()
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := executor.NewDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	serviceSeq++
	d.SetOwner(executor.Owner{Node: "svc-test", Instance: fmt.Sprintf("svc%d-%d", os.Getpid(), serviceSeq)})
	j, err := d.Start(ctx, executor.Spec{JobID: fmt.Sprintf("svc%d-%d", os.Getpid(), serviceSeq), LeaseCID: "bafy-svc",
		Image: modelimage.Tag, Env: env, ServicePort: modelimage.Port, CPUs: 1, MemoryMiB: 128, Pids: 64}, executor.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		if err := j.Remove(rctx); err != nil {
			t.Errorf("remove %s: %v", j.ID(), err)
		}
	})
	addr, err := j.(executor.Service).ServiceAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Up when /health answers, straight from the host (the daemon's view).
	waitFor(t, 20*time.Second, "the model server's /health", func() bool {
		resp, err := http.Get("http://" + addr.String() + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return d, j, addr
}

// bareHost is a libp2p host of the local network, closed with the test.
func bareHost(t testing.TB, ctx context.Context) *p2p.Host {
	t.Helper()
	h, err := p2p.New(ctx, p2p.Network(repo.NetworkLocal), p2p.Logger(quietLog), p2p.DiscoveryInterval(0),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DisableNATServices())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// serviceRig is a provider host serving a forwarder with limits of the
// test's choosing, and a connected renter and stranger.
type serviceRig struct {
	f                      *providing.Forwarder
	prov, renter, stranger *p2p.Host
}

func newServiceRig(t testing.TB, ctx context.Context, lim providing.ForwardLimits) *serviceRig {
	r := &serviceRig{f: providing.NewForwarder(lim, quietLog), prov: bareHost(t, ctx), renter: bareHost(t, ctx), stranger: bareHost(t, ctx)}
	t.Cleanup(r.f.Close)
	r.prov.LibP2P().SetStreamHandler(r.prov.ProtocolID(wire.ServiceProto), r.f.Handle)
	for _, h := range []*p2p.Host{r.renter, r.stranger} {
		if err := h.LibP2P().Connect(ctx, addrInfo(r.prov)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// client is an HTTP client whose every connection is a service stream
// from h to job on the rig's provider.
func (r *serviceRig) client(h *p2p.Host, job string) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return services.Dial(ctx, h, r.prov.ID(), job)
		},
	}}
}

// serviceAPIOf is rn's service namespace, called directly rather than
// over RPC.
func serviceAPIOf(rn *Node) services.API {
	return services.NewAPI(func() *services.Manager { return rn.renterServices })
}
