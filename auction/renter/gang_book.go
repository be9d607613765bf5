package renter

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

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

// GangSharePatience is how long a round of a placement's parallel rounds
// waits for its share of the book to show a provider free: well under
// the providers' default start deadline (30 s), so that the awards its
// siblings won do not lapse while it waits; a round that finds nothing
// is then tried alone over the whole book.
const GangSharePatience = 12 * time.Second

// GangShares deals the providers able to run a member into n disjoint
// shares, one for each of a placement's parallel rounds
// (GangAction.Batch, Request.Only). The feasible offers of book not in
// avoid come first, in order of the tier's floor (equal floors in the
// order of tiebreak, nil: of the provider ID), dealt in turn, so that
// share k's cheapest is the k-th cheapest provider free now and the
// members together land on the n cheapest, as rounds one after another
// would. Then, dealt on in the same way, the offers that only look busy
// now (their GPUs booked, as a provider just freed shows until it
// republishes; GangFits counts them too), which a patient round may wait
// for. A share may be empty: fewer providers can run a member than there
// are rounds.
func GangShares(spec *auction.JobSpec, book []*auction.Offer, env auction.Env, avoid []string, n int, tiebreak func(string) uint64) [][]string {
	if n <= 0 {
		return nil
	}
	skip := make(map[string]bool, len(avoid))
	for _, p := range avoid {
		skip[p] = true
	}
	open := make([]*auction.Offer, 0, len(book))
	byProvider := make(map[string]*auction.Offer, len(book))
	for _, o := range book {
		if o != nil && !skip[o.Provider] {
			open = append(open, o)
			byProvider[o.Provider] = o
		}
	}
	ok, rejected := auction.Feasible(spec, open, env)
	var later []*auction.Offer
	for _, r := range rejected {
		if o := byProvider[r.Provider]; o != nil && onlyForNow(auction.Diagnose(spec, o, env)) {
			later = append(later, o)
		}
	}
	byFloor := func(a, b *auction.Offer) int {
		if c := cmp.Compare(a.Prices.Of(spec.Tier), b.Prices.Of(spec.Tier)); c != 0 {
			return c
		}
		if tiebreak != nil {
			if c := cmp.Compare(tiebreak(a.Provider), tiebreak(b.Provider)); c != 0 {
				return c
			}
		}
		return strings.Compare(a.Provider, b.Provider)
	}
	slices.SortFunc(ok, byFloor)
	slices.SortFunc(later, byFloor)
	shares := make([][]string, n)
	seen := map[string]bool{}
	k := 0
	for _, o := range append(ok, later...) {
		if seen[o.Provider] {
			continue
		}
		seen[o.Provider] = true
		shares[k%n] = append(shares[k%n], o.Provider)
		k++
	}
	return shares
}

// FailedAwards is the providers a round awarded that refused (not for a
// lost race, which is nobody's fault) or failed to answer: a gang's next
// placement avoids them (GangEvent.Failed). nil for a nil Explain.
func (ex *Explain) FailedAwards() []string {
	if ex == nil {
		return nil
	}
	var out []string
	for _, aw := range ex.Awards {
		if aw.Refused != "" && !aw.Raced || aw.Error != "" {
			out = append(out, aw.Provider)
		}
	}
	return out
}
