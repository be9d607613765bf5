// Package repo is a node's directory and configuration: the identity key,
// the RPC token, the instance ID, the daemon's lock and rpc.url file
// (Repo), and config.toml (Config, DefaultConfig, validation and the
// commented TOML rendering).
// It opens no network and starts nothing; package node wires it.
package repo

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gofrs/flock"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// File names inside a repo directory. They are part of the user-facing
// contract (scripts read rpc.url and rpc.token), so they never change.
const (
	ConfigFile   = "config.toml"
	IdentityFile = "identity.key"
	TokenFile    = "rpc.token"
	URLFile      = "rpc.url"
	LockFile     = "repo.lock"
	// StoreFile is the node's bbolt database (node.db) inside the repo.
	StoreFile = "node.db"
	// LedgerFile is the ledger database inside the repo.
	LedgerFile = "ledger.db"
	// DataDir is the block store's directory inside the repo.
	DataDir = "data"
)

// ErrRepoExists is returned by InitRepo when the directory already holds a repo.
var ErrRepoExists = errors.New("a gleaner repo already exists here")

// ErrNoRepo is returned by OpenRepo when the directory holds no repo.
var ErrNoRepo = errors.New("no gleaner repo here")

// ErrRepoLocked is returned when another daemon holds the repo.
var ErrRepoLocked = errors.New("another gleaner daemon is already running on this repo")

// Repo is a node's directory: identity, RPC token, config and, while a
// daemon runs, the lock and the rpc.url file.
type Repo struct {
	Dir  string
	lock *flock.Flock
}

// DefaultRepoDir is ~/.gleaner, or $GLEANER_REPO when set.
func DefaultRepoDir() string {
	if d := os.Getenv("GLEANER_REPO"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".gleaner"
	}
	return filepath.Join(home, ".gleaner")
}

// InitRepo creates a repo at dir with a fresh Ed25519 identity, an RPC token
// and a documented config for cfg. It refuses to touch an existing repo.
func InitRepo(dir string, cfg Config) (*Repo, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, IdentityFile)); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrRepoExists, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, ConfigFile)); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrRepoExists, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create repo directory: %w", err)
	}
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate identity: %w", err)
	}
	keyBytes, err := crypto.MarshalPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode identity: %w", err)
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("generate rpc token: %w", err)
	}
	// O_EXCL on every file: two concurrent inits can never both succeed.
	files := []struct {
		name string
		data []byte
	}{
		{IdentityFile, keyBytes},
		{TokenFile, []byte(hex.EncodeToString(tok) + "\n")},
		{ConfigFile, []byte(cfg.Render())},
	}
	for _, f := range files {
		if err := writeExclusive(filepath.Join(dir, f.name), f.data); err != nil {
			return nil, err
		}
	}
	return &Repo{Dir: dir}, nil
}

func writeExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s", ErrRepoExists, filepath.Dir(path))
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// OpenRepo opens an existing repo without locking it (CLI clients read the
// token and URL; only the daemon locks).
func OpenRepo(dir string) (*Repo, error) {
	if _, err := os.Stat(filepath.Join(dir, IdentityFile)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNoRepo, dir)
		}
		return nil, err
	}
	return &Repo{Dir: dir}, nil
}

func (r *Repo) path(name string) string { return filepath.Join(r.Dir, name) }

// Lock takes the repo's exclusive lock. It is an flock(2) lock, which the
// kernel releases when the process dies, so a crashed daemon never leaves the
// repo stuck.
func (r *Repo) Lock() error {
	l := flock.New(r.path(LockFile))
	ok, err := l.TryLock()
	if err != nil {
		return fmt.Errorf("lock repo: %w", err)
	}
	if !ok {
		return ErrRepoLocked
	}
	r.lock = l
	return nil
}

// Unlock releases the lock taken by Lock.
func (r *Repo) Unlock() error {
	if r.lock == nil {
		return nil
	}
	err := r.lock.Unlock()
	r.lock = nil
	return err
}

// Identity loads the node's private key and checks its file mode.
func (r *Repo) Identity() (crypto.PrivKey, error) {
	b, err := readPrivate(r.path(IdentityFile))
	if err != nil {
		return nil, err
	}
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("identity key %s is corrupt: %w", r.path(IdentityFile), err)
	}
	return k, nil
}

// PeerID is the peer ID derived from the repo's identity.
func (r *Repo) PeerID() (peer.ID, error) {
	k, err := r.Identity()
	if err != nil {
		return "", err
	}
	return peer.IDFromPrivateKey(k)
}

// Token returns the RPC bearer token.
func (r *Repo) Token() (string, error) {
	b, err := readPrivate(r.path(TokenFile))
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 32 {
		return "", fmt.Errorf("rpc token %s is too short; delete it and run `gleaner init` on a new repo", r.path(TokenFile))
	}
	return t, nil
}

// readPrivate refuses secrets that other users can read: a leaked token or
// key gives full control of the node.
func readPrivate(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by other users (mode %v); run: chmod 600 %s", path, st.Mode().Perm(), path)
	}
	return os.ReadFile(path)
}

// Config loads and validates config.toml.
func (r *Repo) Config() (Config, error) { return LoadConfig(r.path(ConfigFile)) }

// WriteURL atomically publishes the RPC endpoint for clients.
func (r *Repo) WriteURL(url string) error {
	tmp := r.path(URLFile + ".tmp")
	if err := os.WriteFile(tmp, []byte(url+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, r.path(URLFile))
}

// RemoveURL deletes rpc.url on clean shutdown.
func (r *Repo) RemoveURL() error {
	err := os.Remove(r.path(URLFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// URL returns the RPC endpoint of the running daemon, or ErrNotRunning.
func (r *Repo) URL() (string, error) {
	b, err := os.ReadFile(r.path(URLFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNotRunning
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// ErrNotRunning means no daemon has published an RPC URL for this repo.
var ErrNotRunning = errors.New("no daemon is running for this repo")
