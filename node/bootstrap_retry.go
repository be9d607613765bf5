package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	madns "github.com/multiformats/go-multiaddr-dns"
)

// Bootstrap retry bounds: the first retry soon (a name server or the
// network coming up with the machine), then backing off to a few minutes,
// so that a node started offline joins once it can without hammering DNS.
const (
	bootstrapFirstRetry = time.Second
	bootstrapMaxRetry   = 3 * time.Minute
	bootstrapDialWait   = 5 * time.Second
)

// BootstrapStatus says whether this node reached a bootstrap peer and, if
// not, why and when it tries again (node_info's bootstrap).
type BootstrapStatus struct {
	Entries   int       `json:"entries"`   // bootstrap entries configured (names and addresses)
	Connected bool      `json:"connected"` // connected to at least one bootstrap peer
	Resolved  int       `json:"resolved"`  // peers the entries resolved to at the last try
	LastError string    `json:"last_error,omitempty"`
	NextTry   time.Time `json:"next_try,omitzero"`
	Tries     int       `json:"tries"`
}

// bootstrapper keeps trying the bootstrap list until this node is
// connected to one of its peers: names are resolved again at each try
// (TXT records change, DNS comes up late), with backoff.
type bootstrapper struct {
	n        *Node
	entries  []ma.Multiaddr
	fallback []peer.AddrInfo
	resolver *madns.Resolver

	mu     sync.Mutex
	status BootstrapStatus
}

func (n *Node) resolver() *madns.Resolver {
	if n.opts.DNSResolver != nil {
		return n.opts.DNSResolver
	}
	return madns.DefaultResolver
}

// status is a copy of the current status.
func (b *bootstrapper) get() BootstrapStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.status
}

func (b *bootstrapper) set(f func(s *BootstrapStatus)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.status)
}

// run tries at once, then with backoff, until connected or the node stops.
func (b *bootstrapper) run(ctx context.Context) {
	wait := bootstrapFirstRetry
	for try := 1; ; try++ {
		err := b.try(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			b.set(func(s *BootstrapStatus) { s.Connected, s.LastError, s.NextTry, s.Tries = true, "", time.Time{}, try })
			b.n.log.Info("connected to a bootstrap peer", "tries", try)
			return
		}
		next := wait/2 + rand.N(wait) // jitter: nodes started together do not retry together
		b.set(func(s *BootstrapStatus) { s.LastError, s.NextTry, s.Tries = err.Error(), time.Now().Add(next), try })
		if try == 1 || try%5 == 0 {
			b.n.log.Warn("no bootstrap peer reached; retrying", "err", err, "in", next.Round(time.Second), "tries", try)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
		wait = min(2*wait, bootstrapMaxRetry)
	}
}

// try resolves the entries and dials what they name (the fallback list
// when no name resolves); nil once one bootstrap peer is connected.
func (b *bootstrapper) try(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, bootstrapDialWait)
	peers, errs := ResolveBootstrapWith(rctx, b.resolver, b.entries)
	cancel()
	if len(peers) == 0 && len(b.fallback) > 0 {
		peers = b.fallback
		errs = append(errs, fmt.Errorf("using the %d fallback addresses (p2p.bootstrap_fallback)", len(b.fallback)))
	}
	b.set(func(s *BootstrapStatus) { s.Resolved = len(peers) })
	if len(peers) == 0 {
		return errors.Join(append(errs, errors.New("no bootstrap address to dial"))...)
	}
	h := b.n.host
	for _, p := range peers {
		if h.LibP2P().Network().Connectedness(p.ID) == network.Connected {
			return nil
		}
	}
	var dialErrs []string
	for _, p := range peers {
		if p.ID == h.ID() {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, bootstrapDialWait)
		err := h.Connect(dctx, p)
		cancel()
		if err == nil {
			return nil
		}
		dialErrs = append(dialErrs, fmt.Sprintf("%s: %v", p.ID, err))
	}
	return errors.Join(append(errs, fmt.Errorf("could not dial %d bootstrap peer(s): %s", len(dialErrs), strings.Join(dialErrs, "; ")))...)
}

// bootstrapFallback parses p2p.bootstrap_fallback: plain addresses of
// bootstrap peers, dialled when no bootstrap name resolves.
func bootstrapFallback(entries []string) ([]peer.AddrInfo, error) {
	addrs, err := ParseBootstrap(entries)
	if err != nil {
		return nil, fmt.Errorf("p2p.bootstrap_fallback: %w", err)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(addrs...)
	if err != nil {
		return nil, fmt.Errorf("p2p.bootstrap_fallback: %w", err)
	}
	return infos, nil
}

func (n *Node) bootStatus() *BootstrapStatus {
	if n.boot == nil {
		return nil
	}
	s := n.boot.get()
	return &s
}
