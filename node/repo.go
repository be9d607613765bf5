package node

import "github.com/gleaner-net/gleaner/node/repo"

// The node's directory and configuration live in node/repo; these aliases
// and wrappers keep cmd/ and testnet/ on node's names.

type (
	// Repo is a node's directory: identity, RPC token, config and, while a
	// daemon runs, the lock and the rpc.url file.
	Repo = repo.Repo
	// Config is the node's configuration, read from <repo>/config.toml.
	Config         = repo.Config
	P2PConfig      = repo.P2PConfig
	RPCConfig      = repo.RPCConfig
	LimitsConfig   = repo.LimitsConfig
	ProviderConfig = repo.ProviderConfig
	MarketConfig   = repo.MarketConfig
	TrustConfig    = repo.TrustConfig
)

// File names inside a repo directory; see repo.ConfigFile.
const (
	ConfigFile   = repo.ConfigFile
	IdentityFile = repo.IdentityFile
	TokenFile    = repo.TokenFile
	URLFile      = repo.URLFile
	LockFile     = repo.LockFile
	// StoreFile is the database's name inside the repo.
	StoreFile = repo.StoreFile
	// LedgerFile is the ledger database inside the repo.
	LedgerFile = repo.LedgerFile
)

// Known network names, default ports.
const (
	NetworkLocal   = repo.NetworkLocal
	NetworkTestnet = repo.NetworkTestnet
	DefaultP2PPort = repo.DefaultP2PPort
	DefaultRPCPort = repo.DefaultRPCPort
)

// Errors of the repo; see node/repo.
var (
	ErrRepoExists = repo.ErrRepoExists
	ErrNoRepo     = repo.ErrNoRepo
	ErrRepoLocked = repo.ErrRepoLocked
	ErrNotRunning = repo.ErrNotRunning
)

// DefaultRepoDir is ~/.gleaner, or $GLEANER_REPO when set.
func DefaultRepoDir() string { return repo.DefaultRepoDir() }

// InitRepo creates a repo at dir; see repo.InitRepo.
func InitRepo(dir string, cfg Config) (*Repo, error) { return repo.InitRepo(dir, cfg) }

// OpenRepo opens an existing repo without locking it; see repo.OpenRepo.
func OpenRepo(dir string) (*Repo, error) { return repo.OpenRepo(dir) }

// CheckNetworkChoice checks a network name typed at the command line; see
// repo.CheckNetworkChoice.
func CheckNetworkChoice(name string, private bool) error {
	return repo.CheckNetworkChoice(name, private)
}

// DefaultConfig is the configuration `gleaner init` writes for network.
func DefaultConfig(network string) Config { return repo.DefaultConfig(network) }

// LoadConfig reads and validates a config file; see repo.LoadConfig.
func LoadConfig(path string) (Config, error) { return repo.LoadConfig(path) }

func isLoopback(host string) bool { return repo.IsLoopback(host) }
