package node

import (
	"testing"

	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/wire"
)

// The renter's follow converts the provider's wire codes to the
// refusals auction/renter decides by, by value: each code it acts on must
// read as the refusal of the same name.
func TestWireCodesAreTheRentersRefusals(t *testing.T) {
	for code, want := range map[wire.Code]renter.Refusal{
		wire.CodeNoLease:    renter.RefusalNoLease,
		wire.CodeDisplaced:  renter.RefusalDisplaced,
		wire.CodeExpired:    renter.RefusalExpired,
		wire.CodeStarted:    renter.RefusalStarted,
		wire.CodeNotRunning: renter.RefusalNotRunning,
	} {
		if renter.Refusal(code) != want {
			t.Errorf("wire code %q reads as refusal %q, want %q", code, renter.Refusal(code), want)
		}
	}
}
