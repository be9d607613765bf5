package renter

import (
	"fmt"

	"github.com/gleaner-net/gleaner/auction"
)

// GangFits is the check at submit that the offer book can hold a gang
// at all: members distinct providers each able to run one member (a
// member needs the spec's resources on one provider) by the checks an
// auction applies now. It is made before anything is quoted or bought,
// so that a gang of 8 on a market of 3 providers is refused at once,
// with the field to change, rather than after awards held and released.
// book is the renter's offer book; env as for auction.Feasible.
func GangFits(spec *auction.JobSpec, book []*auction.Offer, env auction.Env) error {
	if spec.Gang == nil {
		return nil
	}
	ok, _ := auction.Feasible(spec, book, env)
	distinct := map[string]bool{}
	for _, o := range ok {
		distinct[o.Provider] = true
	}
	if n := len(distinct); n < spec.Gang.Members {
		return &auction.SpecError{Field: "gang.members", Msg: fmt.Sprintf(
			"%d members need %d distinct providers that can each run resources.gpus %d; the offer book has %d (lower gang.members or relax the spec; `gleaner job explain` shows why offers are rejected)",
			spec.Gang.Members, spec.Gang.Members, spec.Resources.GPUs, n)}
	}
	return nil
}
