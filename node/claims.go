package node

import (
	"context"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
)

// claimHardware binds this provider's GPUs to its identity: at start-up it
// journals a hardware claim (model, VRAM, power limit, GPU UUID hashes,
// driver, simulated or not) unless its feed already states exactly that.
// Renters check signed telemetry against it; a contradiction is a fraud
// proof anyone can verify.
func (n *Node) claimHardware(ctx context.Context, src attest.Source) {
	inv, err := src.Inventory(ctx)
	if err != nil {
		n.log.Warn("no hardware claim: cannot read the GPUs", "err", err)
		return
	}
	c := attest.ClaimOf(inv)
	if prev, ok := latestOwnClaim(n.ledger, n.host.ID().String()); ok && prev.Equal(c) {
		return
	}
	payload, err := c.Encode()
	if err != nil {
		n.log.Warn("no hardware claim", "err", err)
		return
	}
	if _, err := n.feeds.append(ledger.TypeHardwareClaim, payload); err != nil {
		n.log.Warn("hardware claim not journaled", "err", err)
		return
	}
	n.log.Info("hardware claim journaled", "gpus", len(c.GPUs), "simulated", c.Simulated)
}

// latestOwnClaim reads self's feed for its newest hardware claim.
func latestOwnClaim(st *ledger.Store, self string) (attest.Claim, bool) {
	h, ok, err := st.Head(self)
	if err != nil || !ok {
		return attest.Claim{}, false
	}
	var last attest.Claim
	found := false
	_ = st.Walk(self, 1, h.Seq, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		if e.Type == ledger.TypeHardwareClaim {
			if c, err := attest.DecodeClaim(e.Payload); err == nil {
				last, found = c, true
			}
		}
		return nil
	})
	return last, found
}
