package providing

import (
	"testing"

	"github.com/gleaner-net/gleaner/node/wire"
)

// A renter that lets an award go before starting it (a gang whose other
// member could not be placed) frees the GPUs at once, and the settlement
// charges nothing: nothing ran.
func TestCancelOfAnUnstartedAwardReleasesItAtOnce(t *testing.T) {
	r := newRig(t, 1)
	rt := r.renter()
	sp := spec("member", "bronze")
	raw := rt.lease("gang-m0", sp)
	if !r.pj.Holds("gang-m0") {
		t.Fatal("the award holds nothing")
	}
	f := rt.request(wire.JobRequest{Kind: "cancel", Lease: raw})
	if ev := f.end(); ev.Status != wire.StatusCancelled {
		t.Fatalf("cancel answered %+v", ev)
	}
	if r.pj.Holds("gang-m0") {
		t.Fatal("the unstarted award still holds its GPU after its renter let it go")
	}
	if st, _ := r.pj.LeaseState("gang-m0"); st != LeaseEnded {
		t.Fatalf("lease state %q, want %q", st, LeaseEnded)
	}
	if s := r.settlements(); len(s) != 1 || s[0].Charged == nil || *s[0].Charged != 0 || s[0].Total != 0 {
		t.Fatalf("settlements %+v, want one charging nothing", s)
	}
	// The GPU is free for the next renter at once, not after the start
	// deadline.
	r.renter().lease("next", spec("next", "bronze"))
	// And the released award cannot be started after all.
	if ev := rt.start(raw, sp).end(); ev.Type != wire.EventError {
		t.Fatalf("a start of the released award: %+v", ev)
	}
}
