package provider

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// The provider's guard on an award: a lease must repeat the provider's bid
// in every field the bid fixes, so that a renter cannot stretch a quote
// into a longer lease, demand more notice, or name another spec.

// startSkew is how far a silver or bronze lease's start may lie from the
// provider's clock: the award follows the quote within the bid's validity.
const startSkew = 60 * time.Second

// HonoursBid checks that an award repeats the provider's bid: parties,
// job, tier, GPUs, spec, notice and window. The price may be higher (the
// second price clears above the bid), never lower. now is the provider's
// clock, which decides where a window that starts now may begin.
func HonoursBid(l *auction.Lease, bid *auction.Bid, now time.Time) error {
	if bid.JobID != l.JobID || bid.Tier != l.Tier || l.Price < bid.Price || l.GPUs != bid.GPUs ||
		len(bid.GPUHashes) != l.GPUs || !slices.Equal(l.GPUUUIDHash, bid.GPUHashes) {
		return errors.New("the lease does not honour our bid")
	}
	if len(bid.SpecHash) == 0 || !bytes.Equal(l.SpecHash, bid.SpecHash) {
		return errors.New("the lease names another job spec than the one we quoted")
	}
	if l.NoticeSec != bid.NoticeSec {
		return fmt.Errorf("the lease asks for %d s of notice; we quoted %d s", l.NoticeSec, bid.NoticeSec)
	}
	if l.End-l.Start > bid.DurationSec {
		return fmt.Errorf("the lease runs %s; we quoted at most %s",
			time.Duration(l.End-l.Start)*time.Second, time.Duration(bid.DurationSec)*time.Second)
	}
	if l.Tier == auction.Gold {
		if l.Start != bid.Start {
			return fmt.Errorf("the lease starts at %s; we quoted a reservation from %s",
				time.Unix(l.Start, 0).UTC().Format(time.RFC3339), time.Unix(bid.Start, 0).UTC().Format(time.RFC3339))
		}
		return nil
	}
	if l.Start < bid.Start || time.Unix(l.Start, 0).After(now.Add(startSkew)) {
		return fmt.Errorf("the lease starts at %s: work that starts now cannot start before our quote or in the future",
			time.Unix(l.Start, 0).UTC().Format(time.RFC3339))
	}
	return nil
}
