package node

import (
	"context"
	"fmt"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	madns "github.com/multiformats/go-multiaddr-dns"
)

// BootstrapFor returns the bootstrap list to use; see repo.BootstrapFor.
func BootstrapFor(network string, configured []string) []string {
	return repo.BootstrapFor(network, configured)
}

// ParseBootstrap checks bootstrap entries; see repo.ParseBootstrap.
func ParseBootstrap(entries []string) ([]ma.Multiaddr, error) { return repo.ParseBootstrap(entries) }

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
