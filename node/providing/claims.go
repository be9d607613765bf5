package providing

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
)

// Claimer binds this provider's GPUs to its identity: it journals a
// hardware claim (model, VRAM, power limit, GPU UUID hashes, driver,
// simulated or not) at start-up unless the feed already states exactly
// that, and again whenever the GPU monitor sees the hardware change (a GPU
// added or removed, a new driver, a power limit the owner changed).
// Renters check signed telemetry against the latest claim; a contradiction
// is a fraud proof anyone can verify.
type Claimer struct {
	// Ledger is this node's ledger, whose own feed states the latest
	// claim; Self is this node's peer ID.
	Ledger *ledger.Store
	Self   string
	// Append journals an entry to this node's own feed (the ledger's
	// replication, which announces it).
	Append func(typ string, payload []byte) (string, error)
	Log    *slog.Logger
	// MinGap spaces claims out, so a flapping sensor or driver cannot fill
	// the feed: a change is journaled at the first poll after the gap.
	MinGap time.Duration

	// mu guards the three fields below; the ledger is read and appended
	// to outside it, so a slow disk never holds up the GPU monitor's
	// other hooks. appending makes a poll that comes during an append
	// skip instead of journaling the same claim twice.
	mu        sync.Mutex
	last      *attest.Claim // what the feed states now; nil before the first check
	lastAt    time.Time     // when this process last journaled one
	appending bool
}

// ClaimGap is Claimer.MinGap in a running node.
const ClaimGap = time.Minute

// Start reads the GPUs once and journals the claim if it changed.
func (c *Claimer) Start(ctx context.Context, src attest.Source) {
	inv, err := src.Inventory(ctx)
	if err != nil {
		c.Log.Warn("no hardware claim: cannot read the GPUs", "err", err)
		return
	}
	c.Observe(inv)
}

// Observe journals the claim inv makes if the feed does not state it yet.
// It is the GPU monitor's hook, so it runs every poll: comparing is cheap.
func (c *Claimer) Observe(inv attest.Inventory) {
	if len(inv.GPUs) == 0 {
		return // a failed poll, not GPUs gone
	}
	claim := attest.ClaimOf(inv)
	if c.known() == nil {
		if prev, ok := latestOwnClaim(c.Ledger, c.Self); ok {
			c.mu.Lock()
			if c.last == nil {
				c.last = &prev
			}
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	if c.appending || (c.last != nil && (c.last.Equal(claim) || time.Since(c.lastAt) < c.MinGap)) {
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
		c.Log.Warn("hardware claim not journaled", "err", err)
		return
	}
	c.Log.Info("hardware claim journaled", "gpus", len(claim.GPUs), "simulated", claim.Simulated)
}

func (c *Claimer) known() *attest.Claim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

func (c *Claimer) journal(claim attest.Claim) error {
	payload, err := claim.Encode()
	if err != nil {
		return err
	}
	_, err = c.Append(ledger.TypeHardwareClaim, payload)
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
