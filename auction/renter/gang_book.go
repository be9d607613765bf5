package renter

import (
	"fmt"

	"github.com/gleaner-net/gleaner/auction"
)

// GangFits is the check at submit that the offer book can hold a gang
// at all: members distinct providers each able to run one member (a
// member needs the spec's resources on one provider) by the checks an
// auction applies, but for those that only say the offer is busy now. It is made before anything is quoted or bought,
// so that a gang of 8 on a market of 3 providers is refused at once,
// with the field to change, rather than after awards held and released.
// book is the renter's offer book; env as for auction.Feasible.
func GangFits(spec *auction.JobSpec, book []*auction.Offer, env auction.Env) error {
	if spec.Gang == nil {
		return nil
	}
	ok, rejected := auction.Feasible(spec, book, env)
	distinct := map[string]bool{}
	for _, o := range ok {
		distinct[o.Provider] = true
	}
	// An offer busy now (GPUs booked, out of its window) may well hold a
	// member when the gang is placed: only what it can never do counts
	// against the gang. Checked only while the count falls short, so a
	// gang the book holds now costs no diagnosis.
	if len(distinct) < spec.Gang.Members && len(rejected) > 0 {
		byProvider := make(map[string]*auction.Offer, len(book))
		for _, o := range book {
			if o != nil {
				byProvider[o.Provider] = o
			}
		}
		for _, r := range rejected {
			if o := byProvider[r.Provider]; o != nil && !distinct[r.Provider] && onlyForNow(auction.Diagnose(spec, o, env)) {
				distinct[r.Provider] = true
			}
		}
	}
	if n := len(distinct); n < spec.Gang.Members {
		return &auction.SpecError{Field: "gang.members", Msg: fmt.Sprintf(
			"%d members need %d distinct providers that can each run resources.gpus %d; the offer book has %d (lower gang.members or relax the spec; `gleaner job explain` shows why offers are rejected)",
			spec.Gang.Members, spec.Gang.Members, spec.Resources.GPUs, n)}
	}
	return nil
}

// onlyForNow: every check an offer fails says it is busy now (its GPUs
// booked by leases, outside its window), none that it never can run a
// member (too few GPUs, another model, a region, a price above
// max_price, a policy).
func onlyForNow(fs []auction.Failure) bool {
	for _, f := range fs {
		switch f.Reason {
		case auction.ReasonBooked, auction.ReasonNotAvailableNow, auction.ReasonWindowTooShort:
		default:
			return false
		}
	}
	return len(fs) > 0
}
