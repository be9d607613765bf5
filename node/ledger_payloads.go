package node

import (
	"errors"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// checkPayload is the schema of every entry type this node reads, checked
// before an entry is stored (ledger.Store.CheckPayloads), whoever wrote it:
// leases must be signed by both parties, vouchers inside outcomes and
// settlements by the renter, for the lease and exact amount named (see
// ledger/payloads.go, which owns the market's payload types and their
// checks), claims and proofs must parse (and proofs verify). Reputation
// then reads stored entries without checking a signature again. Unknown
// JSON fields are allowed, so that a newer node's entries still
// replicate; an entry that fails here is refused, and with it the rest of
// its author's feed.
func checkPayload(e *ledger.Entry) error {
	switch e.Type {
	case ledger.TypeLease:
		l, _, err := auction.DecodeSignedLease(e.Payload, true)
		if err != nil {
			return err
		}
		if e.Author != l.Renter && e.Author != l.Provider {
			return errors.New("journaled by neither party to the lease")
		}
	case ledger.TypeSettlement:
		s, err := ledger.DecodePayload[ledger.Settlement](e.Payload)
		if err != nil {
			return err
		}
		return s.Check(e.Author)
	case ledger.TypeOutcome:
		o, err := ledger.DecodePayload[ledger.Outcome](e.Payload)
		if err != nil {
			return err
		}
		return o.Check(e.Author)
	case ledger.TypeHardwareClaim:
		_, err := attest.DecodeClaim(e.Payload)
		return err
	case ledger.TypeFraudProof:
		_, err := ledger.VerifyAnyProof(e.Payload)
		return err
	case ledger.TypeProbe:
		p, err := ledger.DecodePayload[ledger.Probe](e.Payload)
		if err != nil {
			return err
		}
		return p.Check()
	case ledger.TypeTelemetryDigest:
		d, err := ledger.DecodePayload[ledger.TelemetryDigest](e.Payload)
		if err != nil {
			return err
		}
		return d.Check()
	}
	return nil
}
