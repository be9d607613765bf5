package peers

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/p2p"
	ma "github.com/multiformats/go-multiaddr"
	madns "github.com/multiformats/go-multiaddr-dns"
)

func bareHost(t *testing.T, ctx context.Context) *p2p.Host {
	t.Helper()
	h, err := p2p.New(ctx, p2p.Network(repo.NetworkLocal), p2p.Logger(quietLog), p2p.DiscoveryInterval(0),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DisableNATServices())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// noDNS is a resolver whose every query fails at once: a machine whose
// name server is down.
func noDNS(t *testing.T) *madns.Resolver {
	t.Helper()
	r, err := madns.NewResolver(madns.WithDefaultResolver(&net.Resolver{PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("no name server") }}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Without a bootstrap list (local's default) there is nothing to try and
// no status to show: node_info leaves bootstrap out.
func TestBootstrapperWithoutAListHasNoStatus(t *testing.T) {
	b, err := NewBootstrapper(repo.NetworkLocal, nil, nil, nil, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Status(); s != nil {
		t.Fatalf("status %+v without a bootstrap list", s)
	}
	done := make(chan struct{})
	go func() { b.Run(context.Background(), nil); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Run kept going without a bootstrap list")
	}
}

// A name that does not resolve is skipped, the fallback addresses are
// dialled instead, at start and by Run, and the status says so.
func TestBootstrapperFallsBackWhenNoNameResolves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	boot, h := bareHost(t, ctx), bareHost(t, ctx)
	fallback := boot.LibP2P().Addrs()[0].String() + "/p2p/" + boot.ID().String()
	b, err := NewBootstrapper(repo.NetworkLocal, []string{"/dnsaddr/boot.gleaner.test"}, []string{fallback}, noDNS(t), quietLog)
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Status(); s == nil || s.Entries != 1 || s.Connected || s.Tries != 0 {
		t.Fatalf("status before any try: %+v", s)
	}
	if got := b.Initial(ctx); len(got) != 1 || got[0].ID != boot.ID() {
		t.Fatalf("initial peers %v, want the fallback %s", got, boot.ID())
	}
	b.Run(ctx, h)
	s := b.Status()
	if !s.Connected || s.Tries != 1 || s.Resolved != 1 || s.LastError != "" || !s.NextTry.IsZero() {
		t.Fatalf("status after Run: %+v", s)
	}
	if len(h.LibP2P().Network().ConnsToPeer(boot.ID())) == 0 {
		t.Fatal("Run returned without a connection to the bootstrap peer")
	}
}

// A bootstrap peer that is down: the status says why and when the next
// try is, and Run keeps trying until ctx ends.
func TestBootstrapperSaysWhyItIsNotConnected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, gone := bareHost(t, ctx), bareHost(t, ctx)
	entry := gone.LibP2P().Addrs()[0].String() + "/p2p/" + gone.ID().String()
	_ = gone.Close()
	b, err := NewBootstrapper(repo.NetworkLocal, []string{entry}, nil, nil, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { b.Run(rctx, h); close(done) }()
	waitFor(t, 20*time.Second, "a failed try in the status", func() bool {
		s := b.Status()
		return s.Tries >= 1 && !s.Connected && strings.Contains(s.LastError, "could not dial 1 bootstrap peer") && !s.NextTry.IsZero()
	})
	rcancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return once its context ended")
	}
}

// A bootstrap entry that is not a peer's multiaddr is refused at once,
// naming the config key for the fallback list.
func TestBootstrapperRefusesBadEntries(t *testing.T) {
	if _, err := NewBootstrapper(repo.NetworkLocal, []string{"not-a-multiaddr"}, nil, nil, quietLog); err == nil {
		t.Error("a bad bootstrap entry accepted")
	}
	if _, err := NewBootstrapper(repo.NetworkLocal, nil, []string{"/ip4/127.0.0.1/tcp/1"}, nil, quietLog); err == nil || !strings.Contains(err.Error(), "p2p.bootstrap_fallback") {
		t.Errorf("fallback without a peer ID: %v", err)
	}
}
