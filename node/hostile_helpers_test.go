package node

import (
	"context"
	"crypto/rand"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"
)

// The hostile-counterparty rig: a real provider daemon in this process
// (host, store, market, ledger, Docker executor, one simulated GPU) and a
// hostile renter, a bare libp2p host with a key of its own that speaks the
// rental protocols by hand, as an attacker's client would.

var demoImageOnce sync.Once
var demoImageErr error

// requireDemoImage fails loudly, never skips, without Docker: these tests
// run real containers.
func requireDemoImage(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("this needs a running Docker engine (it runs real containers): %v: %s", err, out)
	}
	demoImageOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		demoImageErr = demoimage.Build(ctx, "..")
	})
	if demoImageErr != nil {
		t.Fatal(demoImageErr)
	}
}

type hostileRig struct {
	t    testing.TB
	ctx  context.Context
	prov *Node
	h    *p2p.Host
	key  crypto.PrivKey
}

// newHostileRig starts the provider with opts and the owner's settings
// edited by policy (nil: region eu/DE, bronze and silver at 0.50, batch
// only), and a connected hostile renter.
func newHostileRig(t testing.TB, opts Options, policy func(*offers.Settings)) *hostileRig {
	requireDemoImage(t)
	// Long enough for a reservation a minute ahead on a busy Docker engine.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	n := startSellerWith(t, ctx, opts, policy)
	h := hostileHost(t, ctx, n)
	return &hostileRig{t: t, ctx: ctx, prov: n, h: h, key: h.LibP2P().Peerstore().PrivKey(h.ID())}
}

// startTestNode starts a full node on loopback in this process; simulate
// names its simulated GPUs ("" for none). It stops when the test ends.
func startTestNode(t testing.TB, ctx context.Context, simulate string, opts Options) *Node {
	t.Helper()
	return startNodeWith(t, ctx, func(c *repo.Config) { c.Provider.SimulateGPUs = simulate }, opts)
}

// startNodeWith is startTestNode with the loopback config changed by
// edit first (bootstrap, metrics, quotas).
func startNodeWith(t testing.TB, ctx context.Context, edit func(*repo.Config), opts Options) *Node {
	t.Helper()
	cfg := repo.DefaultConfig(repo.NetworkLocal)
	cfg.P2P.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.P2P.MDNS, cfg.P2P.NATTraversal, cfg.P2P.DHTMode = false, false, "server"
	cfg.RPC.Address = "127.0.0.1:0"
	edit(&cfg)
	rp, err := repo.InitRepo(filepath.Join(t.TempDir(), "node"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.InProcess = true
	if opts.Logger == nil {
		opts.Logger = quietLog
	}
	n, err := New(rp, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
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

// hostileHost is a bare host of this network, connected to n.
func hostileHost(t testing.TB, ctx context.Context, n *Node) *p2p.Host {
	t.Helper()
	h, err := p2p.New(ctx, p2p.Network(repo.NetworkLocal), p2p.Logger(quietLog), p2p.DiscoveryInterval(0),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DisableNATServices())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := h.LibP2P().Connect(ctx, addrInfo(n.Host())); err != nil {
		t.Fatal(err)
	}
	return h
}

// hostileSpec is a batch job of the demo image on one GPU.
func hostileSpec(name, sleep string) string {
	return "name: " + name + "\nimage: " + demoimage.Tag + "\ncommand: [\"-sleep\", \"" + sleep + "\", \"-lines\", \"2\"]\n" +
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {expected: 1m, max: 5m}\nallow_simulated: true\n"
}

func (r *hostileRig) exchange(proto string, req, rep any) {
	r.t.Helper()
	s, err := r.h.LibP2P().NewStream(r.ctx, r.prov.Host().ID(), r.h.ProtocolID(proto))
	if err != nil {
		r.t.Fatal(err)
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(15 * time.Second))
	if err := wire.Write(s, req); err != nil {
		r.t.Fatal(err)
	}
	if err := wire.Read(s, wire.MaxEventFrame, rep); err != nil {
		r.t.Fatal(err)
	}
}

// quote asks for a bid on spec for job; it fails the test on a decline.
func (r *hostileRig) quote(job, spec string) (*auction.Bid, []byte) {
	r.t.Helper()
	var rep wire.QuoteReply
	r.exchange(wire.QuoteProto, wire.QuoteRequest{JobID: job, Nonce: randomNonce(), Spec: []byte(spec)}, &rep)
	if rep.Decline != "" {
		r.t.Fatalf("quote for %s declined: %s", job, rep.Decline)
	}
	b, _, err := auction.DecodeSignedBid(rep.Bid, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	return b, rep.Bid
}

// leaseFor is the lease an honest renter would propose for bid; edit, if
// set, changes it as an attacker would before signing.
func (r *hostileRig) leaseFor(b *auction.Bid, raw []byte, edit func(*auction.Lease)) []byte {
	r.t.Helper()
	l := &auction.Lease{JobID: b.JobID, Network: repo.NetworkLocal, Renter: r.h.ID().String(), Provider: b.Provider,
		Tier: b.Tier, Price: b.Price, GPUs: b.GPUs, Start: b.Start, End: b.Start + b.DurationSec,
		NoticeSec: b.NoticeSec, BillingSec: 300, Bid: raw, GPUUUIDHash: b.GPUHashes, SpecHash: b.SpecHash}
	if edit != nil {
		edit(l)
	}
	sl, err := auction.ProposeLease(l, r.key)
	if err != nil {
		r.t.Fatal(err)
	}
	prop, err := sl.Marshal()
	if err != nil {
		r.t.Fatal(err)
	}
	return prop
}

// award proposes the lease and returns the co-signed one, or the refusal.
func (r *hostileRig) award(prop []byte) ([]byte, string) {
	r.t.Helper()
	var rep wire.AwardReply
	r.exchange(wire.AwardProto, wire.AwardRequest{Lease: prop}, &rep)
	return rep.Lease, rep.Refused
}

// lease quotes spec and gets an honest award co-signed.
func (r *hostileRig) lease(job, spec string) []byte {
	r.t.Helper()
	b, raw := r.quote(job, spec)
	l, refused := r.award(r.leaseFor(b, raw, nil))
	if refused != "" {
		r.t.Fatalf("honest award for %s refused: %s", job, refused)
	}
	return l
}

// start sends a start request and returns the stream its events come on.
func (r *hostileRig) start(lease []byte, spec string) network.Stream {
	r.t.Helper()
	s, err := r.h.LibP2P().NewStream(r.ctx, r.prov.Host().ID(), r.h.ProtocolID(wire.JobProto))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = s.Reset() })
	if err := wire.WriteJobRequest(s, &wire.JobRequest{Kind: "start", Lease: lease, Spec: []byte(spec), Nonce: randomNonce()}); err != nil {
		r.t.Fatal(err)
	}
	return s
}

// nextEvent reads events from s until one of type typ (or an error event).
func nextEvent(t testing.TB, s network.Stream, typ wire.EventType) wire.Event {
	t.Helper()
	for {
		_ = s.SetReadDeadline(time.Now().Add(30 * time.Second))
		var ev wire.Event
		if err := wire.Read(s, wire.MaxEventFrame, &ev); err != nil {
			t.Fatalf("waiting for a %q event: %v", typ, err)
		}
		if ev.Type == typ || ev.Type == "error" {
			return ev
		}
	}
}

// Lease states as the provider persists them (node/providing).
const (
	leaseAwarded = providing.LeaseAwarded
	leaseEnded   = providing.LeaseEnded
	leaseExpired = providing.LeaseExpired
)

// leaseState is the provider's persisted state of job's lease.
func (r *hostileRig) leaseState(job string) providing.RecordState {
	state, ok := r.prov.providerJobs.LeaseState(job)
	if !ok {
		return "none"
	}
	return state
}

// settlements counts the provider's settlement entries naming lease cid.
func (r *hostileRig) settlements(cid string) int {
	r.t.Helper()
	n := 0
	err := r.prov.ledger.Walk(r.prov.Host().ID().String(), 0, 1<<62, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		if e.Type == ledger.TypeSettlement && strings.Contains(string(e.Payload), cid) {
			n++
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// containers lists the Docker containers this provider runs for job.
func containers(t *testing.T, job string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=net.gleaner.managed=1", "--format", "{{.Label \"net.gleaner.job\"}} {{.State}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	var mine []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "-"+job+" ") {
			mine = append(mine, line)
		}
	}
	return mine
}

// randomNonce is a fresh 16-byte nonce, as a renter sends with a quote
// request or a start.
func randomNonce() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return b
}

// waitsOnItsOwnJobs marks a test that spends most of its time waiting on
// its own jobs (containers sleeping through their steps, notices,
// reservation windows, restarts) as parallel with the others so marked:
// its daemons listen on ports of their own (tcp/0), keep their own repos,
// and it finds its Docker objects by its nodes' labels or its jobs'
// names, so two such tests cannot see each other. Go runs parallel tests
// only after every serial one has ended, so a marked test never overlaps
// a test that lists Docker objects globally, measures memory or listens
// on a fixed port. Not marked either: a test bounding when a reservation
// starts, a heartbeat arrives or a preempted job is back, whose clock is the shared Docker engine
// or the scheduler. Test time only: every check of the test is unchanged.
func waitsOnItsOwnJobs(t *testing.T) {
	t.Helper()
	t.Parallel()
}
