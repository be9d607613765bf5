package ledger

import (
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func (f *voucherFixture) wire(t *testing.T, total int64) []byte {
	t.Helper()
	raw, err := f.sign(t, 0, 1, auction.Credits(total)).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestSettlementCheck(t *testing.T) {
	f := newVoucherFixture(t)
	good := f.wire(t, 1_500_000)
	cases := []struct {
		name string
		s    Settlement
		by   string
		ok   bool
	}{
		{"paid as the voucher says", Settlement{Lease: f.lease, Renter: f.renterID, Total: 1_500_000, Voucher: good}, f.provID, true},
		{"nothing paid, no voucher", Settlement{Lease: f.lease, Renter: f.renterID}, f.provID, true},
		{"one micro-credit more than the voucher", Settlement{Lease: f.lease, Renter: f.renterID, Total: 1_500_001, Voucher: good}, f.provID, false},
		{"one micro-credit less than the voucher", Settlement{Lease: f.lease, Renter: f.renterID, Total: 1_499_999, Voucher: good}, f.provID, false},
		{"a payment without a voucher", Settlement{Lease: f.lease, Renter: f.renterID, Total: 1}, f.provID, false},
		{"negative", Settlement{Lease: f.lease, Renter: f.renterID, Total: -1}, f.provID, false},
		{"journaled by another provider", Settlement{Lease: f.lease, Renter: f.renterID, Total: 1_500_000, Voucher: good}, f.renterID, false},
		{"another renter", Settlement{Lease: f.lease, Renter: f.provID, Total: 1_500_000, Voucher: good}, f.provID, false},
		{"another lease", Settlement{Lease: cidOf([]byte("other")).String(), Renter: f.renterID, Total: 1_500_000, Voucher: good}, f.provID, false},
		{"no lease", Settlement{Renter: f.renterID}, f.provID, false},
		{"a voucher that does not verify", Settlement{Lease: f.lease, Renter: f.renterID, Total: 1_500_000, Voucher: append(good[:len(good)-1:len(good)-1], good[len(good)-1]^1)}, f.provID, false},
	}
	for _, c := range cases {
		if err := c.s.Check(c.by); (err == nil) != c.ok {
			t.Errorf("%s: Check = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// A settlement written by a 0.1 node carried float credits: it must not
// be read as micro-credits.
func TestSettlementFloatTotalsRefused(t *testing.T) {
	f := newVoucherFixture(t)
	v := f.wire(t, 3_000_000)
	// 1.5 credits does not parse as an integer amount at all.
	if _, err := DecodePayload[Settlement]([]byte(`{"lease":"` + f.lease + `","renter":"` + f.renterID + `","total":1.5}`)); err == nil {
		t.Error("a fractional total parsed")
	}
	// 3 credits written as 3 parses, as 3 micro-credits, and so no longer
	// matches its voucher of 3,000,000.
	s, err := DecodePayload[Settlement]([]byte(`{"lease":"` + f.lease + `","renter":"` + f.renterID + `","total":3}`))
	if err != nil {
		t.Fatal(err)
	}
	s.Voucher = v
	if s.Check(f.provID) == nil {
		t.Error("a whole-credit float total was accepted as micro-credits")
	}
}

func TestOutcomeCheck(t *testing.T) {
	f := newVoucherFixture(t)
	v := f.wire(t, 10)
	for _, r := range []OutcomeResult{OutcomeCompleted, OutcomeFailed, OutcomePreempted, OutcomeAbandoned, OutcomeCancelled} {
		o := Outcome{Lease: f.lease, Provider: f.provID, Result: r, Voucher: v}
		if err := o.Check(f.renterID); err != nil {
			t.Errorf("%s: %v", r, err)
		}
	}
	bad := map[string]Outcome{
		"unknown result":           {Lease: f.lease, Provider: f.provID, Result: "great"},
		"no result":                {Lease: f.lease, Provider: f.provID},
		"no provider":              {Lease: f.lease, Result: OutcomeCompleted},
		"another's voucher":        {Lease: f.lease, Provider: f.renterID, Result: OutcomeCompleted, Voucher: v},
		"voucher of another lease": {Lease: cidOf([]byte("x")).String(), Provider: f.provID, Result: OutcomeCompleted, Voucher: v},
	}
	for name, o := range bad {
		if o.Check(f.renterID) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// The voucher must be the journaling renter's own.
	o := Outcome{Lease: f.lease, Provider: f.provID, Result: OutcomeCompleted, Voucher: v}
	if o.Check(f.provID) == nil {
		t.Error("an outcome citing someone else's voucher was accepted")
	}
}

func TestProbeAndDigestChecks(t *testing.T) {
	good := Probe{Provider: "p", Lease: "l", Kind: ProbeCanary, Result: ProbePassed}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Probe{
		"unknown kind":   {Provider: "p", Lease: "l", Kind: "audit", Result: ProbePassed},
		"unknown result": {Provider: "p", Lease: "l", Kind: ProbeReplica, Result: "great"},
		"no provider":    {Lease: "l", Kind: ProbeReplica, Result: ProbeFailed},
		"no lease":       {Provider: "p", Kind: ProbeReplica, Result: ProbeInconclusive},
	} {
		if p.Check() == nil {
			t.Errorf("probe with %s accepted", name)
		}
	}
	d := TelemetryDigest{Lease: "l", Provider: "p", Summary: TelemetrySummary{Samples: 3}}
	if err := d.Check(); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]TelemetryDigest{
		"no lease":         {Provider: "p"},
		"no provider":      {Lease: "l"},
		"negative samples": {Lease: "l", Provider: "p", Summary: TelemetrySummary{Samples: -1}},
		"negative rejects": {Lease: "l", Provider: "p", Summary: TelemetrySummary{Rejected: -1}},
	} {
		if d.Check() == nil {
			t.Errorf("digest with %s accepted", name)
		}
	}
}

// A provider's settlement and a renter's outcome may name outputs only by
// a CID: anything else a hostile author writes there is refused.
func TestOutputsMustBeACID(t *testing.T) {
	const good = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"
	for _, c := range []struct {
		outputs string
		ok      bool
	}{{"", true}, {good, true}, {"not-a-cid", false}, {"/etc/passwd", false}, {good + strings.Repeat("a", 200), false}} {
		s := Settlement{Lease: "l", Renter: "r", Outputs: c.outputs}
		if err := s.Check("p"); (err == nil) != c.ok {
			t.Errorf("settlement with outputs %.20q: %v, want ok=%v", c.outputs, err, c.ok)
		}
		o := Outcome{Lease: "l", Provider: "p", Result: OutcomeCompleted, Outputs: c.outputs}
		if err := o.Check("r"); (err == nil) != c.ok {
			t.Errorf("outcome with outputs %.20q: %v, want ok=%v", c.outputs, err, c.ok)
		}
	}
}
