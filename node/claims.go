package node

import (
	"context"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
)

// claimer binds this provider's GPUs to its identity: it journals a
// hardware claim (model, VRAM, power limit, GPU UUID hashes, driver,
// simulated or not) at start-up unless the feed already states exactly
// that, and again whenever the GPU monitor sees the hardware change (a GPU
// added or removed, a new driver, a power limit the owner changed).
// Renters check signed telemetry against the latest claim; a contradiction
// is a fraud proof anyone can verify.
type claimer struct {
	n *Node
	// minGap spaces claims out, so a flapping sensor or driver cannot fill
	// the feed: a change is journaled at the first poll after the gap.
	minGap time.Duration

	// mu guards the three fields below; the ledger is read and appended
	// to outside it, so a slow disk never holds up the GPU monitor's
	// other hooks. appending makes a poll that comes during an append
	// skip instead of journaling the same claim twice.
	mu        sync.Mutex
	last      *attest.Claim // what the feed states now; nil before the first check
	lastAt    time.Time     // when this process last journaled one
	appending bool
}

// claimGap is claimer.minGap in a running node.
const claimGap = time.Minute

// start reads the GPUs once and journals the claim if it changed.
func (c *claimer) start(ctx context.Context, src attest.Source) {
	inv, err := src.Inventory(ctx)
	if err != nil {
		c.n.log.Warn("no hardware claim: cannot read the GPUs", "err", err)
		return
	}
	c.observe(inv)
}

// observe journals the claim inv makes if the feed does not state it yet.
// It is the GPU monitor's hook, so it runs every poll: comparing is cheap.
func (c *claimer) observe(inv attest.Inventory) {
	if len(inv.GPUs) == 0 {
		return // a failed poll, not GPUs gone
	}
	claim := attest.ClaimOf(inv)
	if c.known() == nil {
		if prev, ok := latestOwnClaim(c.n.ledger, c.n.host.ID().String()); ok {
			c.mu.Lock()
			if c.last == nil {
				c.last = &prev
			}
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	if c.appending || (c.last != nil && (c.last.Equal(claim) || time.Since(c.lastAt) < c.minGap)) {
		c.mu.Unlock()
		return
	}
	c.appending = true
	c.mu.Unlock()
	err := c.journal(claim)
	c.mu.Lock()
	c.appending = false
	if err == nil {
		c.last, c.lastAt = &claim, time.Now()
	}
	c.mu.Unlock()
	if err != nil {
		c.n.log.Warn("hardware claim not journaled", "err", err)
		return
	}
	c.n.log.Info("hardware claim journaled", "gpus", len(claim.GPUs), "simulated", claim.Simulated)
}

func (c *claimer) known() *attest.Claim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

func (c *claimer) journal(claim attest.Claim) error {
	payload, err := claim.Encode()
	if err != nil {
		return err
	}
	_, err = c.n.feeds.Append(ledger.TypeHardwareClaim, payload)
	return err
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
