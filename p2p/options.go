package p2p

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Option configures a Host. Options are applied in order and defaults are
// filled in afterwards, so an option never has to know about the others.
type Option func(*config) error

type config struct {
	key          crypto.PrivKey
	listen       []ma.Multiaddr
	network      string
	bootstrap    []peer.AddrInfo
	mdns         bool
	relayService bool
	// A relay's per-circuit limits (RelayResources); zero: the defaults.
	circuitDuration time.Duration
	circuitData     int64
	connLow         int
	connHigh        int
	maxMemory       int64
	maxFD           int
	dhtMode         string
	log             *slog.Logger
	noNAT           bool
	discoverEvery   time.Duration
}

// Consumer-machine defaults: a desktop that also runs a GPU job should not
// spend more than a few hundred MiB and a few hundred sockets on the mesh.
const (
	defaultConnLow       = 64
	defaultConnHigh      = 192
	defaultMaxMemory     = 512 << 20
	defaultMaxFD         = 1024
	defaultDiscoverEvery = 30 * time.Second
)

var networkNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// ErrBadNetwork is returned when the network name is missing or malformed.
var ErrBadNetwork = errors.New("p2p: network name must match ^[a-z0-9][a-z0-9-]{0,31}$")

// Identity sets the node key. Default: a fresh Ed25519 key.
func Identity(k crypto.PrivKey) Option {
	return func(c *config) error {
		if k == nil {
			return errors.New("p2p: nil identity key")
		}
		c.key = k
		return nil
	}
}

// ListenAddrs sets the listen addresses. Default: TCP and QUIC on all IPv4
// interfaces with OS-chosen ports.
func ListenAddrs(addrs ...ma.Multiaddr) Option {
	return func(c *config) error {
		c.listen = append(c.listen, addrs...)
		return nil
	}
}

// Network names the network this host belongs to; it is required because it
// scopes every protocol, topic and DHT key so that networks never mix.
func Network(name string) Option {
	return func(c *config) error {
		if !networkNameRE.MatchString(name) {
			return fmt.Errorf("%w: %q", ErrBadNetwork, name)
		}
		c.network = name
		return nil
	}
}

// Bootstrap adds peers to dial at start; they double as static relays.
func Bootstrap(peers ...peer.AddrInfo) Option {
	return func(c *config) error {
		c.bootstrap = append(c.bootstrap, peers...)
		return nil
	}
}

// MDNS enables LAN discovery under the service name "gleaner-<network>".
func MDNS(enabled bool) Option {
	return func(c *config) error { c.mdns = enabled; return nil }
}

// RelayService makes this host a circuit relay v2 and forces DHT server mode;
// meant for public bootstrap nodes.
func RelayService(enabled bool) Option {
	return func(c *config) error { c.relayService = enabled; return nil }
}

// RelayCircuitLimits bounds one circuit through this node when it serves
// as a relay: how long it lives and how many bytes it carries each way;
// zero keeps RelayCircuitDuration or RelayCircuitData.
func RelayCircuitLimits(duration time.Duration, data int64) Option {
	return func(c *config) error {
		if duration < 0 || data < 0 {
			return fmt.Errorf("p2p: negative relay circuit limits (%v, %d bytes)", duration, data)
		}
		c.circuitDuration, c.circuitData = duration, data
		return nil
	}
}

// ConnLimits sets the connection manager watermarks. Discovery stops dialing
// once low is reached; the manager trims down to low above high.
func ConnLimits(low, high int) Option {
	return func(c *config) error {
		if low < 1 || high < low {
			return fmt.Errorf("p2p: bad conn limits low=%d high=%d", low, high)
		}
		c.connLow, c.connHigh = low, high
		return nil
	}
}

// ResourceLimits scales the resource manager to the given memory and file
// descriptor budget.
func ResourceLimits(maxMemoryBytes int64, maxFD int) Option {
	return func(c *config) error {
		if maxMemoryBytes < 16<<20 || maxFD < 16 {
			return fmt.Errorf("p2p: resource limits too small (%d bytes, %d fds)", maxMemoryBytes, maxFD)
		}
		c.maxMemory, c.maxFD = maxMemoryBytes, maxFD
		return nil
	}
}

// DHTMode is "auto" (default), "server" or "client".
func DHTMode(mode string) Option {
	return func(c *config) error {
		switch mode {
		case "auto", "server", "client":
			c.dhtMode = mode
			return nil
		}
		return fmt.Errorf("p2p: unknown DHT mode %q", mode)
	}
}

// Logger sets the logger. Default: slog.Default().
func Logger(l *slog.Logger) Option {
	return func(c *config) error { c.log = l; return nil }
}

// DisableNATServices turns off AutoNAT service, hole punching, the relay
// client, NAT port mapping, QUIC listening and metrics, so that a hundred
// in-process hosts fit on a laptop. For tests and benchmarks only.
func DisableNATServices() Option {
	return func(c *config) error { c.noNAT = true; return nil }
}

// DiscoveryInterval sets how often the host looks for more peers in the DHT
// while below the low watermark; 0 disables the loop (the host still
// advertises itself). Default 30 s.
func DiscoveryInterval(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return errors.New("p2p: negative discovery interval")
		}
		c.discoverEvery = d
		return nil
	}
}

func newConfig(opts []Option) (*config, error) {
	c := &config{discoverEvery: -1}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	// Defaults last, as in libp2p.New.
	if c.network == "" {
		return nil, ErrBadNetwork
	}
	if c.key == nil {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return nil, err
		}
		c.key = k
	}
	if len(c.listen) == 0 {
		c.listen = []ma.Multiaddr{ma.StringCast("/ip4/0.0.0.0/tcp/0")}
		if !c.noNAT {
			c.listen = append(c.listen, ma.StringCast("/ip4/0.0.0.0/udp/0/quic-v1"))
		}
	}
	if c.connLow == 0 {
		c.connLow, c.connHigh = defaultConnLow, defaultConnHigh
	}
	if c.maxMemory == 0 {
		c.maxMemory, c.maxFD = defaultMaxMemory, defaultMaxFD
	}
	if c.dhtMode == "" {
		c.dhtMode = "auto"
	}
	if c.relayService {
		c.dhtMode = "server"
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.discoverEvery < 0 {
		c.discoverEvery = defaultDiscoverEvery
	}
	return c, nil
}
