package node

import (
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func TestOnDemandForMatchesModelsByName(t *testing.T) {
	list := map[string]auction.Credits{"H100": 2_000_000, "h100": 9, "RTX4090": 400_000, "A100": 1_000_000}
	got := onDemandFor([]auction.PriceStat{{Model: "h100"}, {Model: "RTX4090", Tier: auction.Gold}, {Model: "A100-80GB"}}, list)
	// "H100" sorts before "h100": the first spelling wins; A100-80GB is
	// not A100 (no guessing at equivalents: the page shows —).
	if len(got) != 2 || got["h100"] != 2_000_000 || got["RTX4090"] != 400_000 {
		t.Errorf("on-demand %v", got)
	}
}
