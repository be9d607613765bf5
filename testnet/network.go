package testnet

import (
	"crypto/rand"
	"encoding/hex"
)

// NetworkPrefix starts the private network name that Up gives a local
// testnet when UpOptions.Network is empty.
const NetworkPrefix = "tn-"

// NewNetworkName returns a fresh private network name: NetworkPrefix and 6
// random hex digits, a valid p2p network name (^[a-z0-9][a-z0-9-]{0,31}$).
// Nodes of different networks speak different protocols and never merge,
// so two local testnets on one host (or a testnet and another local node)
// stay apart.
func NewNetworkName() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return NetworkPrefix + hex.EncodeToString(b)
}
