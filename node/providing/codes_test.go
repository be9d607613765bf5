package providing

import (
	"fmt"
	"testing"

	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/wire"
)

// Every refusal the renter acts on has its code, also when wrapped; and
// the words sent beside it still map to the same code for renters that
// predate codes (wire.LegacyCode), so old and new renters decide alike.
func TestRefusalsCarryTheirCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want wire.Code
	}{
		{errNoLease, wire.CodeNoLease},
		{errSuperseded, wire.CodeNoLease},
		{sched.ErrNoLease, wire.CodeNoLease},
		{sched.ErrDisplaced, wire.CodeDisplaced},
		{errStartedAlready, wire.CodeStarted},
		{sched.ErrStarted, wire.CodeStarted},
		{errAwardExpired, wire.CodeExpired},
		{fmt.Errorf("checking the start: %w", errStartedAlready), wire.CodeStarted},
		{fmt.Errorf("the owner's policy no longer allows this job: gpus"), wire.CodeRefused},
	} {
		ev := errorEvent(c.err)
		if ev.Code != c.want {
			t.Errorf("%v: code %q, want %q", c.err, ev.Code, c.want)
		}
		ev.Code = ""
		if got := wire.LegacyCode(ev); got != c.want {
			t.Errorf("%v: an old renter reads %q from the words, want %q", c.err, got, c.want)
		}
	}
}
