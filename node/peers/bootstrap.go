package peers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/p2p"
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

// ResolveBootstrap turns multiaddrs into peers, resolving /dnsaddr names.
// A name that does not resolve is skipped and reported, never fatal: one
// dead bootstrap entry must not keep a node off the network.
func ResolveBootstrap(ctx context.Context, addrs []ma.Multiaddr) ([]peer.AddrInfo, []error) {
	return ResolveBootstrapWith(ctx, madns.DefaultResolver, addrs)
}

// ResolveBootstrapWith is ResolveBootstrap through resolver r.
func ResolveBootstrapWith(ctx context.Context, r *madns.Resolver, addrs []ma.Multiaddr) ([]peer.AddrInfo, []error) {
	var flat []ma.Multiaddr
	var errs []error
	for _, m := range addrs {
		if !repo.IsDNSAddr(m) {
			flat = append(flat, m)
			continue
		}
		res, err := r.Resolve(ctx, m)
		if err != nil || len(res) == 0 {
			errs = append(errs, fmt.Errorf("bootstrap %s did not resolve: %v", m, err))
			continue
		}
		flat = append(flat, res...)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(flat...)
	if err != nil {
		errs = append(errs, fmt.Errorf("bootstrap: %w", err))
	}
	return infos, errs
}

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

// Bootstrapper keeps trying the bootstrap list until this node is
// connected to one of its peers: names are resolved again at each try
// (TXT records change, DNS comes up late), with backoff.
type Bootstrapper struct {
	network  string
	entries  []ma.Multiaddr
	fallback []peer.AddrInfo
	resolver *madns.Resolver
	log      *slog.Logger

	mu     sync.Mutex
	status BootstrapStatus
}

// NewBootstrapper checks the bootstrap list of network (configured, or
// the network's own when none is: repo.BootstrapFor) and fallback, the
// plain addresses of p2p.bootstrap_fallback, dialled when no bootstrap
// name resolves. r resolves /dnsaddr names; nil is the system's.
func NewBootstrapper(network string, configured, fallback []string, r *madns.Resolver, log *slog.Logger) (*Bootstrapper, error) {
	entries, err := repo.ParseBootstrap(repo.BootstrapFor(network, configured))
	if err != nil {
		return nil, err
	}
	fb, err := bootstrapFallback(fallback)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = madns.DefaultResolver
	}
	return &Bootstrapper{network: network, entries: entries, fallback: fb, resolver: r, log: log,
		status: BootstrapStatus{Entries: len(entries)}}, nil
}

// bootstrapFallback parses p2p.bootstrap_fallback: plain addresses of
// bootstrap peers, dialled when no bootstrap name resolves.
func bootstrapFallback(entries []string) ([]peer.AddrInfo, error) {
	addrs, err := repo.ParseBootstrap(entries)
	if err != nil {
		return nil, fmt.Errorf("p2p.bootstrap_fallback: %w", err)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(addrs...)
	if err != nil {
		return nil, fmt.Errorf("p2p.bootstrap_fallback: %w", err)
	}
	return infos, nil
}

// Initial resolves the list once, for the host's first dials (the
// fallback addresses when nothing resolves), and logs the entries it
// skipped; Run keeps trying after it.
func (b *Bootstrapper) Initial(ctx context.Context) []peer.AddrInfo {
	peers, errs := ResolveBootstrapWith(ctx, b.resolver, b.entries)
	if len(peers) == 0 {
		peers = b.fallback
	}
	for _, e := range errs {
		b.log.Warn("bootstrap entry skipped", "err", e)
	}
	if b.network == repo.NetworkTestnet && len(peers) == 0 {
		b.log.Warn("no testnet bootstrap peer could be resolved yet; retrying with backoff (gleaner id shows why), and meanwhile the node finds only peers that dial it or that you connect to (gleaner connect <multiaddr>)")
	}
	return peers
}

// Status is a copy of the current status; nil without a bootstrap list
// (local), which Run does not try.
func (b *Bootstrapper) Status() *BootstrapStatus {
	if len(b.entries) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.status
	return &s
}

func (b *Bootstrapper) set(f func(s *BootstrapStatus)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.status)
}

// Run tries at once, then with backoff, until h is connected to a
// bootstrap peer or ctx ends. Without a bootstrap list it returns at once.
func (b *Bootstrapper) Run(ctx context.Context, h *p2p.Host) {
	if len(b.entries) == 0 {
		return
	}
	wait := bootstrapFirstRetry
	for try := 1; ; try++ {
		err := b.try(ctx, h)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			b.set(func(s *BootstrapStatus) { s.Connected, s.LastError, s.NextTry, s.Tries = true, "", time.Time{}, try })
			b.log.Info("connected to a bootstrap peer", "tries", try)
			return
		}
		next := wait/2 + rand.N(wait) // jitter: nodes started together do not retry together
		b.set(func(s *BootstrapStatus) { s.LastError, s.NextTry, s.Tries = err.Error(), time.Now().Add(next), try })
		if try == 1 || try%5 == 0 {
			b.log.Warn("no bootstrap peer reached; retrying", "err", err, "in", next.Round(time.Second), "tries", try)
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
func (b *Bootstrapper) try(ctx context.Context, h *p2p.Host) error {
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
