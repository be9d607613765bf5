package node

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// checkPayload is the schema of every entry type this node reads, checked
// before an entry is stored (ledger.Store.CheckPayloads), whoever wrote it:
// leases must be signed by both parties, vouchers inside outcomes and
// settlements by the renter, for the lease and amount named, claims and
// proofs must parse (and proofs verify). Reputation then reads stored
// entries without checking a signature again. Unknown JSON fields are
// allowed, so that a newer node's entries still replicate; an entry that
// fails here is refused, and with it the rest of its author's feed.
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
		var s Settlement
		if err := json.Unmarshal(e.Payload, &s); err != nil {
			return err
		}
		if s.Lease == "" || s.Renter == "" || !(s.Total >= 0) {
			return fmt.Errorf("lease %q, renter %q, total %v", s.Lease, s.Renter, s.Total)
		}
		if len(s.Voucher) == 0 {
			if s.Total != 0 {
				return errors.New("claims a payment without the renter's voucher")
			}
			return nil
		}
		v, _, err := ledger.DecodeSignedVoucher(s.Voucher)
		if err != nil {
			return err
		}
		if v.Lease != s.Lease || v.Provider != e.Author || v.Renter != s.Renter || float64(v.Total)/1e6 != s.Total {
			return errors.New("the voucher is for another lease, party or amount")
		}
	case ledger.TypeOutcome:
		var o Outcome
		if err := json.Unmarshal(e.Payload, &o); err != nil {
			return err
		}
		if o.Lease == "" || o.Provider == "" || o.Result == "" {
			return fmt.Errorf("lease %q, provider %q, result %q", o.Lease, o.Provider, o.Result)
		}
		if len(o.Voucher) > 0 {
			v, _, err := ledger.DecodeSignedVoucher(o.Voucher)
			if err != nil {
				return err
			}
			if v.Lease != o.Lease || v.Renter != e.Author || v.Provider != o.Provider {
				return errors.New("the voucher is for another lease or party")
			}
		}
	case ledger.TypeHardwareClaim:
		_, err := attest.DecodeClaim(e.Payload)
		return err
	case ledger.TypeFraudProof:
		_, err := ledger.VerifyAnyProof(e.Payload)
		return err
	case ledger.TypeProbe:
		var p Probe
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return err
		}
		if p.Provider == "" || p.Lease == "" || (p.Kind != "canary" && p.Kind != "replica") ||
			(p.Result != ProbePassed && p.Result != ProbeFailed && p.Result != ProbeInconclusive) {
			return fmt.Errorf("provider %q, lease %q, kind %q, result %q", p.Provider, p.Lease, p.Kind, p.Result)
		}
	case ledger.TypeTelemetryDigest:
		var d TelemetryDigest
		return json.Unmarshal(e.Payload, &d)
	}
	return nil
}
