package testnet

import (
	"testing"

	"github.com/gleaner-net/gleaner/node/repo"
)

// TestNewNetworkNameIsPrivateAndValid: every name is a valid network name
// (the repo's config checks the p2p rule), private (--private accepts it),
// and two runs get different names.
func TestNewNetworkNameIsPrivateAndValid(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		n := NewNetworkName()
		if len(n) != len(NetworkPrefix)+6 || n[:len(NetworkPrefix)] != NetworkPrefix {
			t.Fatalf("%q: want %s and 6 hex digits", n, NetworkPrefix)
		}
		if err := repo.DefaultConfig(n).Validate(); err != nil {
			t.Fatalf("%q: %v", n, err)
		}
		if err := repo.CheckNetworkChoice(n, true); err != nil {
			t.Fatalf("%q as a private network: %v", n, err)
		}
		seen[n] = true
	}
	if len(seen) < 19 {
		t.Fatalf("only %d different names in 20", len(seen))
	}
}
