package repo

import (
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// testnetBootstrap is the public testnet's built-in bootstrap list. It is a
// /dnsaddr name rather than fixed addresses so that operators can add,
// move or retire bootstrap and relay nodes by editing DNS TXT records
// (_dnsaddr.<name>) without a release, as IPFS does. config.toml and
// --bootstrap replace it.
var testnetBootstrap = []string{
	"/dnsaddr/bootstrap.testnet.gleaner.network",
}

// BootstrapFor returns the bootstrap list to use: the configured one, or the
// network's built-in list when none is configured.
func BootstrapFor(network string, configured []string) []string {
	if len(configured) > 0 {
		return configured
	}
	if network == NetworkTestnet {
		return testnetBootstrap
	}
	return nil
}

// ParseBootstrap checks that every entry is a multiaddr that names a peer
// (/p2p/<id>) or a /dnsaddr name that resolves to such addresses.
func ParseBootstrap(entries []string) ([]ma.Multiaddr, error) {
	out := make([]ma.Multiaddr, 0, len(entries))
	for _, s := range entries {
		m, err := ma.NewMultiaddr(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not a multiaddr: %v", s, err)
		}
		if IsDNSAddr(m) {
			out = append(out, m)
			continue
		}
		if _, err := peer.AddrInfoFromP2pAddr(m); err != nil {
			return nil, fmt.Errorf("%q must end in /p2p/<peer-id> (for example /ip4/203.0.113.7/tcp/4030/p2p/12D3Koo...)", s)
		}
		out = append(out, m)
	}
	return out, nil
}

// IsDNSAddr reports whether m holds a /dnsaddr component, a name to be
// resolved into peer addresses.
func IsDNSAddr(m ma.Multiaddr) bool {
	for _, c := range m {
		if c.Protocol().Code == ma.P_DNSADDR {
			return true
		}
	}
	return false
}
