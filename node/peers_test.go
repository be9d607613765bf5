package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/peers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// freePort is a TCP port on loopback that nothing listens on now: a
// daemon's fixed p2p port, which a restart listens on again.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startOnPort starts a node in its own repo that listens on a fixed port
// and has no bootstrap list, as a daemon with its default config does.
func startOnPort(t *testing.T, ctx context.Context, simulate string) *Node {
	return startOnPortLogging(t, ctx, simulate, quietLog)
}

func startOnPortLogging(t *testing.T, ctx context.Context, simulate string, log *slog.Logger) *Node {
	t.Helper()
	cfg := repo.DefaultConfig(repo.NetworkLocal)
	cfg.P2P.Listen = []string{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", freePort(t))}
	cfg.P2P.Bootstrap = nil
	cfg.P2P.MDNS, cfg.P2P.NATTraversal, cfg.P2P.DHTMode = false, false, "server"
	cfg.RPC.Address = "127.0.0.1:0"
	cfg.Provider.SimulateGPUs = simulate
	rp, err := repo.InitRepo(filepath.Join(t.TempDir(), "node"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return startAgain(t, ctx, &Node{repo: rp, cfg: cfg, opts: Options{Logger: log, InProcess: true}})
}

func stopNode(t testing.TB, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func connected(a, b *Node) bool {
	return len(a.Host().LibP2P().Network().ConnsToPeer(b.Host().ID())) > 0
}

// Three nodes in a line (a-b-c), each connected by hand once, all stopped,
// then all started again with no bootstrap list and no connect: they find
// each other again from node.db alone, within seconds, although a's and
// b's first dials went to nodes that were still down.
func TestRestartedNodesReconnectWithoutABootstrapList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := &lockedBuffer{}
	log := func(name string) *slog.Logger {
		return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name)
	}
	a, b, c := startOnPortLogging(t, ctx, "", log("a")), startOnPortLogging(t, ctx, "", log("b")), startOnPortLogging(t, ctx, "", log("c"))
	for _, pair := range [][2]*Node{{a, b}, {b, c}} {
		if err := pair[0].Host().Connect(ctx, addrInfo(pair[1].Host())); err != nil {
			t.Fatal(err)
		}
	}
	ids := []peer.ID{a.Host().ID(), b.Host().ID(), c.Host().ID()}
	for _, n := range []*Node{a, b, c} {
		stopNode(t, n)
	}
	// What b kept: a and c, with the addresses they listen on.
	st, err := store.Open(filepath.Join(b.repo.Dir, repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := peers.LoadKnown(peersBucket{st}, repo.NetworkLocal)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || !slices.ContainsFunc(kept, func(ai peer.AddrInfo) bool { return ai.ID == ids[0] }) ||
		!slices.ContainsFunc(kept, func(ai peer.AddrInfo) bool { return ai.ID == ids[2] }) {
		t.Fatalf("b kept %v, want a (%s) and c (%s)", kept, ids[0], ids[2])
	}
	listens := map[peer.ID]string{ids[0]: a.cfg.P2P.Listen[0], ids[2]: c.cfg.P2P.Listen[0]}
	for _, ai := range kept {
		if !slices.ContainsFunc(ai.Addrs, func(m ma.Multiaddr) bool { return m.String() == listens[ai.ID] }) {
			t.Errorf("b kept %s at %v, not at %s where it listens", ai.ID, ai.Addrs, listens[ai.ID])
		}
	}

	start := time.Now()
	a2 := startAgain(t, ctx, a)
	b2 := startAgain(t, ctx, b)
	c2 := startAgain(t, ctx, c)
	deadline := time.Now().Add(10 * time.Second)
	for !connected(a2, b2) || !connected(b2, c2) {
		if time.Now().After(deadline) {
			var peerLines []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "part=peers") {
					peerLines = append(peerLines, l)
				}
			}
			t.Fatalf("after 10 s: a-b connected %v, b-c connected %v; the nodes logged:\n%s", connected(a2, b2), connected(b2, c2), strings.Join(peerLines, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("reconnected %v after the first start", time.Since(start).Round(time.Millisecond))
}

// A provider restarts (its stop withdraws its offer, so the renter's book
// loses it); the renter, which never restarts nor connects, has the
// provider's offer in its book again within 10 s of the provider's start,
// and the owner changed nothing.
func TestARestartedProvidersOfferReachesItsRenterAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prov := startSeller(t, ctx, nil)
	rn := renterOf(t, ctx, prov)
	id := prov.Host().ID().String()
	// The renter's subscription has reached the provider, so that the
	// withdrawal at its stop reaches the renter.
	waitFor(t, 30*time.Second, "the renter in the provider's offer topic", func() bool {
		return slices.Contains(prov.Host().PubSub().ListPeers(prov.Host().TopicName("offers/eu/1")), rn.Host().ID())
	})
	before, _, _ := rn.market.Book().Get(id)
	stopNode(t, prov)
	waitFor(t, 30*time.Second, "the withdrawal in the renter's book", func() bool {
		_, _, ok := rn.market.Book().Get(id)
		return !ok
	})
	start := time.Now()
	startAgain(t, ctx, prov) // listens on a new port: only it can dial
	waitFor(t, 10*time.Second, "the restarted provider's offer in the renter's book", func() bool {
		o, _, ok := rn.market.Book().Get(id)
		return ok && o.Seq > before.Seq
	})
	t.Logf("offer back in the renter's book %v after the provider's start", time.Since(start).Round(time.Millisecond))
}

// A provider whose withdrawal never reached its renter (a crash, or a
// network that failed first) starts again: the renter still holds the
// old offer, so no DHT sweep fetches the new one (sweeps fetch only the
// offers a book lacks); the renter has the new offer within 10 s all the
// same, through the fetch on connect and the provider's publication for
// the peers that joined.
func TestAProviderBackFromACrashReplacesItsOfferAtItsRenter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The cut must hold until the provider has stopped: its withdrawal
	// must not arrive. Both sides dial their known peers again within
	// seconds of having none (peers.go), so on a loaded machine a slow
	// Stop can meet a fresh connection and send it; such a run is not the
	// case under test, and the setup is tried again (three times at most).
	var prov, rn *Node
	var id string
	var before *auction.Offer
	for try := 1; ; try++ {
		prov = startSeller(t, ctx, nil)
		rn = renterOf(t, ctx, prov)
		id = prov.Host().ID().String()
		before, _, _ = rn.market.Book().Get(id)
		if err := prov.Host().Disconnect(rn.Host().ID()); err != nil {
			t.Fatal(err)
		}
		stopNode(t, prov)
		o, _, ok := rn.market.Book().Get(id)
		if ok && o.Seq == before.Seq {
			break
		}
		if try == 3 {
			t.Fatalf("the renter's book changed while the provider was cut off, %d times: %+v", try, o)
		}
		t.Logf("try %d: the two reconnected before the provider stopped (book now %+v); again", try, o)
	}
	start := time.Now()
	startAgain(t, ctx, prov)
	waitFor(t, 10*time.Second, "the restarted provider's new offer in the renter's book", func() bool {
		o, _, ok := rn.market.Book().Get(id)
		return ok && o.Seq > before.Seq+1 // past the withdrawal it never got
	})
	t.Logf("new offer in the renter's book %v after the provider's start", time.Since(start).Round(time.Millisecond))
}

// Issue 12, case 5: a renter restarts while its job runs, and nothing
// tells it where the provider is (no bootstrap list, no connect, no DHT
// peer): it finds the provider at the address it kept, attaches again,
// and the job runs to its end.
func TestARestartedRenterReachesItsProviderAtTheAddressItKept(t *testing.T) {
	waitsOnItsOwnJobs(t)
	r := newHostileRig(t, Options{}, nil)
	rn := startTestNode(t, r.ctx, "", Options{})
	if err := rn.Host().Connect(r.ctx, addrInfo(r.prov.Host())); err != nil {
		t.Fatal(err)
	}
	id, rn := runThenRestartRenter(t, r, rn, "kept", "8s")
	done := waitJob(t, rn, id, 60*time.Second, "ended after the restart", func(j *renting.JobRecord) bool { return j.State != renting.StateRunning })
	if done.State != renting.StateCompleted || done.Attempts != 1 {
		t.Fatalf("after the restart the job is %s after %d attempts: %s", done.State, done.Attempts, done.Error)
	}
}
