package repo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestInitRepoCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	r, err := InitRepo(dir, DefaultConfig(NetworkLocal))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{IdentityFile, TokenFile, ConfigFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	id, err := r.PeerID()
	if err != nil || id == "" {
		t.Fatalf("PeerID: %q, %v", id, err)
	}
	tok, err := r.Token()
	if err != nil || len(tok) != 64 {
		t.Fatalf("token %q, %v", tok, err)
	}
	cfg, err := r.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Network != NetworkLocal {
		t.Errorf("network %q", cfg.Network)
	}
}

func TestInitRepoRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	r1, err := InitRepo(dir, DefaultConfig(NetworkLocal))
	if err != nil {
		t.Fatal(err)
	}
	id1, _ := r1.PeerID()
	if _, err := InitRepo(dir, DefaultConfig(NetworkTestnet)); !errors.Is(err, ErrRepoExists) {
		t.Fatalf("second init: %v, want ErrRepoExists", err)
	}
	r2, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id2, _ := r2.PeerID(); id2 != id1 {
		t.Fatalf("identity changed from %s to %s", id1, id2)
	}
}

func TestOpenRepoMissing(t *testing.T) {
	if _, err := OpenRepo(t.TempDir()); !errors.Is(err, ErrNoRepo) {
		t.Fatalf("got %v, want ErrNoRepo", err)
	}
}

func TestRepoLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	if _, err := InitRepo(dir, DefaultConfig(NetworkLocal)); err != nil {
		t.Fatal(err)
	}
	a, _ := OpenRepo(dir)
	b, _ := OpenRepo(dir)
	if err := a.Lock(); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(); !errors.Is(err, ErrRepoLocked) {
		t.Fatalf("second lock: %v, want ErrRepoLocked", err)
	}
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(); err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	_ = b.Unlock()
}

func TestSecretsReadableByOthersAreRefused(t *testing.T) {
	dir := t.TempDir()
	r, err := InitRepo(dir, DefaultConfig(NetworkLocal))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, TokenFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Token(); err == nil {
		t.Fatal("a world-readable token was accepted")
	}
}

func TestURLFileLifecycle(t *testing.T) {
	r, err := InitRepo(t.TempDir(), DefaultConfig(NetworkLocal))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.URL(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("URL before write: %v", err)
	}
	if err := r.WriteURL("http://127.0.0.1:1234"); err != nil {
		t.Fatal(err)
	}
	if u, err := r.URL(); err != nil || u != "http://127.0.0.1:1234" {
		t.Fatalf("URL = %q, %v", u, err)
	}
	if err := r.RemoveURL(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.URL(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("URL after remove: %v", err)
	}
}
