package repo

import (
	"fmt"

	"github.com/gleaner-net/gleaner/auction"
)

// NetworkMainnet is reserved for the public network that is not there
// yet: a private network of that name would be mistaken for it later.
const NetworkMainnet = "mainnet"

// publicNetworks are the networks gleaner knows, for suggestions.
var publicNetworks = []string{NetworkTestnet, NetworkLocal}

// CheckNetworkChoice checks a network name as a user types it at the
// command line (gleaner init, gleaner daemon --init or --network). Any
// valid name other than testnet and local is a private network, which
// sees nobody unless given bootstrap peers, so a typo (testent) must not
// quietly make one: a private network is made only with private set.
// Config.Validate does not apply this rule; a repo's config.toml, and
// tests and simulations that build configs, name their network on purpose.
func CheckNetworkChoice(name string, private bool) error {
	if !networkName.MatchString(name) {
		return fmt.Errorf("network %q: use lowercase letters, digits and '-'%s", name, auction.DidYouMean(name, publicNetworks))
	}
	switch {
	case name == NetworkMainnet:
		return fmt.Errorf("network %q does not exist yet: gleaner runs a public testnet (%q) for now", name, NetworkTestnet)
	case name == NetworkTestnet || name == NetworkLocal:
		if private {
			return fmt.Errorf("network %q is not private; --private is for a network of your own", name)
		}
		return nil
	case !private:
		return fmt.Errorf("unknown network %q%s", name, auction.DidYouMean(name, publicNetworks))
	}
	return nil
}
