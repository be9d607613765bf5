package repo

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/ondemand"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/rpc"
	ma "github.com/multiformats/go-multiaddr"
)

// Config is the node's configuration, read from <repo>/config.toml. Every
// field is documented in the file that Render writes.
type Config struct {
	Network  string         `toml:"network"`
	P2P      P2PConfig      `toml:"p2p"`
	RPC      RPCConfig      `toml:"rpc"`
	Limits   LimitsConfig   `toml:"limits"`
	Provider ProviderConfig `toml:"provider"`
	Market   MarketConfig   `toml:"market"`
	Trust    TrustConfig    `toml:"trust"`
	Data     DataConfig     `toml:"data"`
	Metrics  MetricsConfig  `toml:"metrics"`
}

// MetricsConfig holds the Prometheus endpoint's settings: a listener of
// its own, apart from the RPC API, that serves /metrics without a token.
type MetricsConfig struct {
	// Address is where /metrics is served (host:port; port 0 = any free
	// port); "" = no metrics endpoint.
	Address string `toml:"address"`
	// AllowRemote admits a non-loopback Address: the metrics say what
	// this node runs and earns to anyone who can reach the port.
	AllowRemote bool `toml:"allow_remote"`
}

// DataConfig bounds the node's content-addressed block store
// (<repo>/data): job inputs, outputs and pinned datasets.
type DataConfig struct {
	// QuotaGiB is the most the store may hold on disk; a write that would
	// pass it is refused, never half-done.
	QuotaGiB int `toml:"quota_gib"`
	// InputFetchTimeoutS bounds, as a provider, the fetch of a job's
	// inputs before it starts: an input nobody serves fails the start
	// after this long.
	InputFetchTimeoutS int `toml:"input_fetch_timeout_s"`
	// OutputRetentionH is how long, as a provider, a job's outputs are
	// kept for its renter to fetch (`gleaner job fetch`); then they are
	// unpinned and the next GC deletes them.
	OutputRetentionH int `toml:"output_retention_hours"`
	// MaxJobInputGiB bounds, as a provider, a job's inputs in all, as
	// written into its volumes (a block counted as often as the DAG links
	// it): a job whose inputs pass it is refused before any is written.
	MaxJobInputGiB int `toml:"max_job_input_gib"`
	// DiskReserveGiB is what, as a provider, a job's inputs must leave
	// free on the disks they go to (the block store's, the volumes'): a
	// job whose inputs would not fit above it is refused.
	DiskReserveGiB int `toml:"disk_reserve_gib"`
}

// DefaultDataQuotaGiB is the block store's quota when config.toml does not
// set one (repos made before the store existed): enough for a model and a
// dataset, small next to a provider's disk.
const DefaultDataQuotaGiB = 20

// DefaultInputFetchTimeoutS is data.input_fetch_timeout_s when unset: long
// enough for tens of GB from a home uplink, short enough that an input
// nobody serves is re-auctioned within the half hour.
const DefaultInputFetchTimeoutS = 1200

// DefaultMaxJobInputGiB is data.max_job_input_gib when unset: the
// default store quota, the most a fetch could keep anyway.
const DefaultMaxJobInputGiB = 20

// DefaultDiskReserveGiB is data.disk_reserve_gib when unset: room for
// the node's own databases and logs, and the system's, once a job's
// inputs are written.
const DefaultDiskReserveGiB = 2

// MaxDataGiB bounds the sizes of [data] in GiB (1 PiB).
const MaxDataGiB = 1 << 20

// defaultData is [data] with every default, for a file that predates
// the section or some of its keys.
func defaultData() DataConfig {
	return DataConfig{QuotaGiB: DefaultDataQuotaGiB, InputFetchTimeoutS: DefaultInputFetchTimeoutS, OutputRetentionH: DefaultOutputRetentionH,
		MaxJobInputGiB: DefaultMaxJobInputGiB, DiskReserveGiB: DefaultDiskReserveGiB}
}

// DefaultOutputRetentionH keeps outputs a week: a renter offline over a
// weekend still finds them.
const DefaultOutputRetentionH = 168

// TrustConfig sets how this node, as a renter, checks providers' work.
type TrustConfig struct {
	// CanarySpec is a job spec with verify.expect_sha256 (a known-answer
	// job) sent along with awards at a provider's CanaryRate; "" = none.
	CanarySpec    string  `toml:"canary_spec"`
	CanaryMinRate float64 `toml:"canary_min_rate"`
}

// ProviderConfig says which GPUs this node can sell. What it sells them
// for (prices, calendar, policy) is runtime state: see offers.Settings
// (node.OfferSettings).
type ProviderConfig struct {
	SimulateGPUs string `toml:"simulate_gpus"`
	// ServiceFirewall: "auto" (or unset) makes the daemon, when it has
	// the permission, insert the iptables rules that keep service jobs off
	// the host's own listeners and out of other containers' reach
	// (executor.EnsureServiceFirewall); "off"
	// leaves the firewall to an owner who manages it.
	ServiceFirewall string `toml:"service_firewall"`
}

// Values of provider.service_firewall.
const (
	ServiceFirewallAuto = "auto"
	ServiceFirewallOff  = "off"
)

// MarketConfig bounds the renter's view of the market.
type MarketConfig struct {
	Continents []string `toml:"continents"`
	MaxOffers  int      `toml:"max_offers"`
	// OnDemandPrices names a CSV of on-demand GPU prices in the format of
	// the Vast.ai snapshot (gpu_model, gpu_count, usd_per_hour, location;
	// auction/ondemand), shown beside the market's prices (market_stats,
	// the console's market page); "" = none. It is read at start.
	OnDemandPrices string `toml:"on_demand_prices"`
}

// P2PConfig holds the libp2p host's settings.
type P2PConfig struct {
	Listen    []string `toml:"listen"`
	Bootstrap []string `toml:"bootstrap"`
	// BootstrapFallback are plain /p2p addresses dialled when no
	// bootstrap name resolves (DNS down or blocked).
	BootstrapFallback []string `toml:"bootstrap_fallback"`
	MDNS              bool     `toml:"mdns"`
	NATTraversal      bool     `toml:"nat_traversal"`
	RelayService      bool     `toml:"relay_service"`
	// RelayCircuitS and RelayCircuitMB bound what one circuit through a
	// relaying node lives and carries (each way); 0 is p2p's default (an
	// hour, 64 MiB). A circuit at its limit is reset and its users dial
	// again (docs/NAT.md); tests set seconds to see that happen.
	RelayCircuitS  int    `toml:"relay_circuit_s"`
	RelayCircuitMB int    `toml:"relay_circuit_mb"`
	DHTMode        string `toml:"dht_mode"`
}

// Bounds on the relay's per-circuit limits.
const (
	MaxRelayCircuitS  = 24 * 3600
	MaxRelayCircuitMB = 4096
)

// RPCConfig holds the local JSON-RPC endpoint's settings.
type RPCConfig struct {
	Address     string `toml:"address"`
	AllowRemote bool   `toml:"allow_remote"`
	// AllowedOrigins are Origin headers admitted besides the API's own
	// loopback origins (scheme://host[:port], or "*").
	AllowedOrigins []string `toml:"allowed_origins"`
}

// LimitsConfig bounds what the node may use of the owner's machine.
type LimitsConfig struct {
	ConnectionsLow  int `toml:"connections_low"`
	ConnectionsHigh int `toml:"connections_high"`
	MaxMemoryMB     int `toml:"max_memory_mb"`
	MaxFileDescs    int `toml:"max_file_descriptors"`
}

// Default ports, chosen to stay clear of kubo (4001/5001).
const (
	DefaultP2PPort = 4030
	DefaultRPCPort = 4031
)

// DefaultCanaryMinRate is the least often a renter checks even a provider
// with a long clean streak: never checking again would let a provider
// build a streak and then cheat forever.
const DefaultCanaryMinRate = 0.05

var networkName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// DefaultConfig is the configuration `gleaner init` writes for network.
func DefaultConfig(network string) Config {
	return Config{
		Network: network,
		P2P: P2PConfig{
			Listen: []string{
				fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", DefaultP2PPort),
				fmt.Sprintf("/ip4/0.0.0.0/udp/%d/quic-v1", DefaultP2PPort),
			},
			BootstrapFallback: []string{},
			MDNS:              network == NetworkLocal,
			NATTraversal:      network != NetworkLocal,
			DHTMode:           "auto",
		},
		RPC: RPCConfig{Address: fmt.Sprintf("127.0.0.1:%d", DefaultRPCPort), AllowedOrigins: []string{}},
		Limits: LimitsConfig{
			ConnectionsLow:  64,
			ConnectionsHigh: 192,
			MaxMemoryMB:     512,
			MaxFileDescs:    1024,
		},
		Provider: ProviderConfig{ServiceFirewall: ServiceFirewallAuto},
		Market:   MarketConfig{Continents: []string{}, MaxOffers: offers.MaxBookDefault},
		Trust:    TrustConfig{CanaryMinRate: DefaultCanaryMinRate},
		Data:     defaultData(),
	}
}

// Known network names. Any other valid name is a private network that needs
// explicit bootstrap peers.
const (
	NetworkLocal   = "local"
	NetworkTestnet = "testnet"
)

// LoadConfig reads and validates a config file. Unknown keys are errors: a
// misspelt setting must never be silently ignored.
func LoadConfig(path string) (Config, error) {
	// Sections added after a repo was made keep their defaults when the
	// file predates them; a key that is present is always validated.
	c := Config{Data: defaultData()}
	md, err := toml.DecodeFile(path, &c)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return c, fmt.Errorf("config file %s is missing", path)
		}
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return c, fmt.Errorf("config %s: unknown setting(s) %s", path, strings.Join(keys, ", "))
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Validate checks every field and names the one that is wrong.
func (c Config) Validate() error {
	if !networkName.MatchString(c.Network) {
		return fmt.Errorf("network %q: use lowercase letters, digits and '-' (for example %q or %q)", c.Network, NetworkLocal, NetworkTestnet)
	}
	if len(c.P2P.Listen) == 0 {
		return errors.New("p2p.listen: at least one listen address is needed")
	}
	for _, s := range c.P2P.Listen {
		if _, err := ma.NewMultiaddr(s); err != nil {
			return fmt.Errorf("p2p.listen: %q is not a multiaddr (%v); example: /ip4/0.0.0.0/tcp/4030", s, err)
		}
	}
	if _, err := ParseBootstrap(c.P2P.Bootstrap); err != nil {
		return fmt.Errorf("p2p.bootstrap: %w", err)
	}
	for _, f := range c.P2P.BootstrapFallback {
		if m, err := ma.NewMultiaddr(f); err != nil || IsDNSAddr(m) {
			return fmt.Errorf("p2p.bootstrap_fallback: %q: want a plain address ending in /p2p/<peer-id>, not a name to resolve", f)
		}
	}
	if _, err := ParseBootstrap(c.P2P.BootstrapFallback); err != nil {
		return fmt.Errorf("p2p.bootstrap_fallback: %w", err)
	}
	if c.P2P.RelayCircuitS < 0 || c.P2P.RelayCircuitS > MaxRelayCircuitS {
		return fmt.Errorf("p2p.relay_circuit_s %d: give 1..%d seconds, or 0 for an hour", c.P2P.RelayCircuitS, MaxRelayCircuitS)
	}
	if c.P2P.RelayCircuitMB < 0 || c.P2P.RelayCircuitMB > MaxRelayCircuitMB {
		return fmt.Errorf("p2p.relay_circuit_mb %d: give 1..%d MiB, or 0 for 64", c.P2P.RelayCircuitMB, MaxRelayCircuitMB)
	}
	switch c.P2P.DHTMode {
	case "auto", "server", "client":
	default:
		return fmt.Errorf("p2p.dht_mode %q: use auto, server or client", c.P2P.DHTMode)
	}
	host, port, err := net.SplitHostPort(c.RPC.Address)
	if err != nil {
		return fmt.Errorf("rpc.address %q: want host:port, for example 127.0.0.1:%d", c.RPC.Address, DefaultRPCPort)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("rpc.address %q: bad port", c.RPC.Address)
	}
	if !IsLoopback(host) && !c.RPC.AllowRemote {
		return fmt.Errorf("rpc.address %q is not a loopback address; anyone who can reach it and has the token controls this node, so set rpc.allow_remote = true (or --rpc-allow-remote) if you really mean it", c.RPC.Address)
	}
	if err := c.Metrics.validate(); err != nil {
		return err
	}
	for _, o := range c.RPC.AllowedOrigins {
		if _, err := rpc.CanonicalOrigin(o); err != nil {
			return fmt.Errorf("rpc.allowed_origins: %v", err)
		}
	}
	l := c.Limits
	if l.ConnectionsLow < 1 || l.ConnectionsHigh < l.ConnectionsLow {
		return fmt.Errorf("limits: need 1 <= connections_low (%d) <= connections_high (%d)", l.ConnectionsLow, l.ConnectionsHigh)
	}
	if l.MaxMemoryMB < 64 {
		return fmt.Errorf("limits.max_memory_mb %d: at least 64 is needed", l.MaxMemoryMB)
	}
	if l.MaxFileDescs < 64 {
		return fmt.Errorf("limits.max_file_descriptors %d: at least 64 is needed", l.MaxFileDescs)
	}
	if c.Provider.SimulateGPUs != "" {
		if _, err := attest.ParseSimulateSpec(c.Provider.SimulateGPUs); err != nil {
			return fmt.Errorf("provider.simulate_gpus: %v", err)
		}
	}
	switch c.Provider.ServiceFirewall {
	case "", ServiceFirewallAuto, ServiceFirewallOff:
	default:
		return fmt.Errorf("provider.service_firewall %q: use %q (the daemon adds the rules when it may) or %q (you manage the firewall)",
			c.Provider.ServiceFirewall, ServiceFirewallAuto, ServiceFirewallOff)
	}
	if c.Data.QuotaGiB < 1 {
		return fmt.Errorf("data.quota_gib %d: at least 1 is needed (the block store for job inputs, outputs and datasets)", c.Data.QuotaGiB)
	}
	if t := c.Data.InputFetchTimeoutS; t < 5 || t > 86400 {
		return fmt.Errorf("data.input_fetch_timeout_s %d: use 5 to 86400 (seconds)", t)
	}
	if h := c.Data.OutputRetentionH; h < 1 || h > 24*365 {
		return fmt.Errorf("data.output_retention_hours %d: use 1 to 8760", h)
	}
	if g := c.Data.MaxJobInputGiB; g < 1 || g > MaxDataGiB {
		return fmt.Errorf("data.max_job_input_gib %d: use 1 to %d (GiB a job's inputs may take once written, in all)", g, MaxDataGiB)
	}
	if g := c.Data.DiskReserveGiB; g < 0 || g > MaxDataGiB {
		return fmt.Errorf("data.disk_reserve_gib %d: use 0 to %d (GiB a job's inputs must leave free on the disk)", g, MaxDataGiB)
	}
	for _, cont := range c.Market.Continents {
		if !slices.Contains(auction.Continents, cont) {
			return fmt.Errorf("market.continents: %q is not one of %v", cont, auction.Continents)
		}
	}
	if c.Market.MaxOffers < 10 || c.Market.MaxOffers > 1_000_000 {
		return fmt.Errorf("market.max_offers %d: use 10 to 1000000", c.Market.MaxOffers)
	}
	if p := c.Market.OnDemandPrices; p != "" {
		if _, err := ondemand.Load(p); err != nil {
			return fmt.Errorf("market.on_demand_prices: %v", err)
		}
	}
	if r := c.Trust.CanaryMinRate; !(r >= 0 && r <= 1) {
		return fmt.Errorf("trust.canary_min_rate %v: use a probability, 0 to 1 (0 means the default %v)", r, DefaultCanaryMinRate)
	}
	return nil
}

// DefaultMetricsPort is the port docs and examples use for metrics.address.
const DefaultMetricsPort = 4032

func (m MetricsConfig) validate() error {
	if m.Address == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(m.Address)
	if err != nil {
		return fmt.Errorf("metrics.address %q: want host:port, for example 127.0.0.1:%d, or \"\" for no metrics endpoint", m.Address, DefaultMetricsPort)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("metrics.address %q: bad port", m.Address)
	}
	if !IsLoopback(host) && !m.AllowRemote {
		return fmt.Errorf("metrics.address %q is not a loopback address; the metrics tell anyone who can reach it what this node runs and earns, so set metrics.allow_remote = true if you really mean it (and firewall the port to your Prometheus)", m.Address)
	}
	return nil
}

// IsLoopback reports whether host (a name or an IP, without a port) is
// localhost or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
