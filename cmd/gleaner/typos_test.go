package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTyposAreUsageErrors: network names and --limit values a new user
// mistyped are usage errors (one line, a hint, exit 2) that say what was
// meant, and nothing is created.
func TestTyposAreUsageErrors(t *testing.T) {
	dir := t.TempDir()
	nets := "networks: testnet (the public testnet), local"
	for _, c := range []struct {
		args []string
		want string
		hint string
	}{
		{[]string{"init", "--network", "testent"}, `unknown network "testent"; did you mean "testnet"?`, nets},
		{[]string{"init", "--network", "mainnet"}, `network "mainnet" does not exist yet: gleaner runs a public testnet ("testnet") for now`, nets},
		{[]string{"init", "--network", "mainnet", "--private"}, `network "mainnet" does not exist yet: gleaner runs a public testnet ("testnet") for now`, nets},
		{[]string{"init", "--network", "lab-7"}, `unknown network "lab-7"`, nets},
		{[]string{"init", "--network", "Local"}, `network "Local": use lowercase letters, digits and '-'; did you mean "local"?`, nets},
		{[]string{"init", "--private"}, `network "testnet" is not private; --private is for a network of your own`, nets},
		{[]string{"daemon", "--init", "--network", "lcoal"}, `unknown network "lcoal"; did you mean "local"?`, nets},
		{[]string{"market", "offers", "--limit", "0"}, "--limit 0: want 1 to 10000", "use --limit N with N from 1 to 10000"},
		{[]string{"ledger", "history", "--limit", "0"}, "--limit 0: want 1 to 1000", "use --limit N with N from 1 to 1000"},
		{[]string{"ledger", "history", "--limit", "1001"}, "--limit 1001: want 1 to 1000", "use --limit N"},
	} {
		repo := filepath.Join(dir, strings.Join(c.args, "_"))
		r := gleaner(t, append([]string{"--repo", repo}, c.args...)...)
		mustUsageText(t, r, strings.Join(c.args, " "), c.want, c.hint)
		if _, err := os.Stat(repo); !os.IsNotExist(err) {
			t.Errorf("%v made a repo: %v", c.args, err)
		}
	}
}

// TestPrivateNetworkWhenAsked: a network of one's own is made with
// --private, and a daemon on that repo may name it again without it.
func TestPrivateNetworkWhenAsked(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "n")
	mustOK(t, gleaner(t, "--repo", repo, "init", "--network", "lab-7", "--private"), "init --private")
	cfg, err := os.ReadFile(filepath.Join(repo, "config.toml"))
	if err != nil || !strings.Contains(string(cfg), `network = "lab-7"`) {
		t.Fatalf("config.toml: %v\n%s", err, cfg)
	}
	mustOK(t, gleaner(t, "--repo", filepath.Join(t.TempDir(), "t"), "init", "--network", "testnet"), "init --network testnet")
}
