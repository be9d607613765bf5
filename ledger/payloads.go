package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ipfs/go-cid"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
)

// The JSON payloads of the market's entry types, each with the check a
// store runs before it keeps an entry of that type (the node hooks them
// into Store.CheckPayloads). A check refuses what would lie to reputation:
// after it, readers trust a stored payload without checking a signature
// again. Unknown JSON fields are allowed, so that a newer node's entries
// still replicate; unknown values of the closed sets below (outcome
// results, probe kinds and results) are refused, as unknown entry types
// are: a new value needs every checker upgraded first.
//
// Amounts are auction.Credits, integers in micro-credits (1 credit =
// 1,000,000), and compare exactly. Entries written before this (0.1
// testnets) carried float credits; they are refused, not converted: a
// fractional total does not parse as an integer, and a whole one (3
// credits written as 3) would mean 3 micro-credits and so no longer
// match the voucher it embeds. Only a zero total reads the same either
// way. Those testnets are reset rather than migrated.

// Settlement is the provider's entry for what a lease was paid: the best
// voucher the renter signed for it, and what the provider charged of it.
// Vouchers pay a billing interval ahead and stay cumulative: a voucher is
// the cap the renter authorised, the settlement says what was taken
// (Charged, the cost of the billed running time to the second, see
// auction/provider.Charge) and what went back (Refund).
type Settlement struct {
	Lease  string `json:"lease"`  // CID of the co-signed lease
	Renter string `json:"renter"` // peer ID
	// Total is what the voucher promises, in micro-credits
	// (auction.Credits); it equals the voucher's total exactly.
	Total   auction.Credits `json:"total"`
	Voucher []byte          `json:"voucher,omitempty"` // the renter's SignedVoucher, wire bytes
	// Unpaid is the provider's rating of the renter: it stopped the job
	// because the renter's vouchers stopped coming.
	Unpaid bool `json:"unpaid,omitempty"`
	// Charged is what the provider took of Total, at most Total; nil in
	// entries written before refunds, which charged the whole Total (see
	// Paid).
	Charged *auction.Credits `json:"charged,omitempty"`
	// Refund is Total - Charged: the prepaid part the renter keeps.
	Refund auction.Credits `json:"refund,omitempty"`
	// Outputs is the CID of the job's results (its spec's outputs volume,
	// imported as a UnixFS directory when it ended): signed here by the
	// provider, so that what the renter fetches is what the provider
	// answered.
	Outputs string `json:"outputs,omitempty"`
}

// Paid is what the renter paid on the lease: Charged, or for an entry
// written before refunds, the whole voucher total. Balances and
// reputation weights read this, never Total.
func (s *Settlement) Paid() auction.Credits {
	if s.Charged != nil {
		return *s.Charged
	}
	return s.Total
}

// Check validates a settlement journaled by provider: a total is claimed
// only with a voucher the renter signed for this lease, this provider and
// exactly this total; the charge is at most that total and the refund
// exactly the rest.
func (s *Settlement) Check(provider string) error {
	if s.Lease == "" || s.Renter == "" || s.Total < 0 {
		return fmt.Errorf("settlement: lease %q, renter %q, total %d", s.Lease, s.Renter, s.Total)
	}
	if err := checkOutputs(s.Outputs); err != nil {
		return fmt.Errorf("settlement: %w", err)
	}
	switch {
	case s.Charged == nil && s.Refund != 0:
		return fmt.Errorf("settlement: a refund of %d without a charge", s.Refund)
	case s.Charged != nil && (*s.Charged < 0 || *s.Charged > s.Total):
		return fmt.Errorf("settlement: charged %d of a voucher total of %d", *s.Charged, s.Total)
	case s.Charged != nil && s.Refund != s.Total-*s.Charged:
		return fmt.Errorf("settlement: refund %d, but the total %d less the charge %d is %d", s.Refund, s.Total, *s.Charged, s.Total-*s.Charged)
	}
	if len(s.Voucher) == 0 {
		if s.Total != 0 {
			return errors.New("settlement claims a payment without the renter's voucher")
		}
		return nil
	}
	v, _, err := DecodeSignedVoucher(s.Voucher)
	if err != nil {
		return fmt.Errorf("settlement: %w", err)
	}
	if v.Lease != s.Lease || v.Provider != provider || v.Renter != s.Renter || v.Total != s.Total {
		return errors.New("settlement: the voucher is for another lease, party or amount")
	}
	return nil
}

// OutcomeResult is how a lease ended, as its renter saw it.
type OutcomeResult string

// Outcome results.
const (
	OutcomeCompleted OutcomeResult = "completed" // the job exited 0
	OutcomeFailed    OutcomeResult = "failed"    // a non-zero exit, an error, or never started
	OutcomePreempted OutcomeResult = "preempted" // stopped with notice, as its tier allows
	OutcomeAbandoned OutcomeResult = "abandoned" // the provider vanished mid-job
	OutcomeCancelled OutcomeResult = "cancelled" // by the renter
)

// Valid reports whether r is one of the results above.
func (r OutcomeResult) Valid() bool {
	switch r {
	case OutcomeCompleted, OutcomeFailed, OutcomePreempted, OutcomeAbandoned, OutcomeCancelled:
		return true
	}
	return false
}

// Outcome is the renter's entry for how a lease ended: the evidence
// reputation is computed from.
type Outcome struct {
	Lease    string        `json:"lease"`
	Provider string        `json:"provider"`
	Result   OutcomeResult `json:"result"`
	Detail   string        `json:"detail,omitempty"`
	// Voucher is the renter's newest signed voucher for the lease: what it
	// paid, so that an outcome weighs even when the provider never settled
	// (a provider that abandoned the job).
	Voucher []byte `json:"voucher,omitempty"`
	// Outputs is the CID of the results the provider reported.
	Outputs string `json:"outputs,omitempty"`
}

// Check validates an outcome journaled by renter: a known result, and a
// voucher, if any, that renter signed for this lease and provider.
func (o *Outcome) Check(renter string) error {
	if o.Lease == "" || o.Provider == "" || !o.Result.Valid() {
		return fmt.Errorf("outcome: lease %q, provider %q, result %q", o.Lease, o.Provider, o.Result)
	}
	if err := checkOutputs(o.Outputs); err != nil {
		return fmt.Errorf("outcome: %w", err)
	}
	if len(o.Voucher) == 0 {
		return nil
	}
	v, _, err := DecodeSignedVoucher(o.Voucher)
	if err != nil {
		return fmt.Errorf("outcome: %w", err)
	}
	if v.Lease != o.Lease || v.Renter != renter || v.Provider != o.Provider {
		return errors.New("outcome: the voucher is for another lease or party")
	}
	return nil
}

// ProbeKind is how a renter checked a provider's work.
type ProbeKind string

// Probe kinds.
const (
	ProbeCanary  ProbeKind = "canary"  // a known-answer job: the expected output hash is in the spec
	ProbeReplica ProbeKind = "replica" // one job on several providers, output hashes compared
)

// ProbeResult is what a probe found.
type ProbeResult string

// Probe results.
const (
	ProbePassed       ProbeResult = "passed"
	ProbeFailed       ProbeResult = "failed"
	ProbeInconclusive ProbeResult = "inconclusive" // replicas without a majority
)

// Probe is a renter's check of a provider's work against an answer it can
// verify.
type Probe struct {
	Provider string      `json:"provider"`
	Lease    string      `json:"lease"` // CID of the checked lease
	Kind     ProbeKind   `json:"kind"`
	Result   ProbeResult `json:"result"`
	Expected string      `json:"expected_sha256,omitempty"` // replicas: the majority's (a canary's stays secret)
	Got      string      `json:"got_sha256"`
	Detail   string      `json:"detail,omitempty"`
}

// Check validates a probe: a provider and lease named, a known kind and
// result. Whether the prober rented that lease is reputation's question,
// answered when it reads the probe.
func (p *Probe) Check() error {
	okKind := p.Kind == ProbeCanary || p.Kind == ProbeReplica
	okResult := p.Result == ProbePassed || p.Result == ProbeFailed || p.Result == ProbeInconclusive
	if p.Provider == "" || p.Lease == "" || !okKind || !okResult {
		return fmt.Errorf("probe: provider %q, lease %q, kind %q, result %q", p.Provider, p.Lease, p.Kind, p.Result)
	}
	return nil
}

// TelemetrySummary is what a renter learned from a run's signed
// telemetry: how many samples verified, how many were rejected and why.
type TelemetrySummary struct {
	Samples       int     `json:"samples"`
	Rejected      int     `json:"rejected"`
	LastRejection string  `json:"last_rejection,omitempty"`
	AvgUtilPct    float64 `json:"avg_util_pct"`
	MaxTempC      int     `json:"max_temp_c"`
	Simulated     bool    `json:"simulated"`
	// Contradiction is set when a signed sample rules out the provider's
	// hardware claim; the renter journals the proof.
	Contradiction string `json:"contradiction,omitempty"`
}

// TelemetryDigest is the renter's entry summarising a run's verified
// telemetry: evidence for (or against) the provider's hardware claims.
type TelemetryDigest struct {
	Lease    string           `json:"lease"`
	Provider string           `json:"provider"`
	Summary  TelemetrySummary `json:"summary"`
}

// Check validates a digest: a lease and provider named, counts that are
// counts.
func (d *TelemetryDigest) Check() error {
	if d.Lease == "" || d.Provider == "" || d.Summary.Samples < 0 || d.Summary.Rejected < 0 {
		return fmt.Errorf("telemetry digest: lease %q, provider %q, samples %d, rejected %d",
			d.Lease, d.Provider, d.Summary.Samples, d.Summary.Rejected)
	}
	return nil
}

// DecodePayload parses a payload of one of the types above from JSON,
// allowing unknown fields (see the comment at the top of this file).
func DecodePayload[T Settlement | Outcome | Probe | TelemetryDigest](payload []byte) (*T, error) {
	var v T
	if err := json.Unmarshal(payload, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// CheckPayload is the schema of every entry type a node reads, checked
// before an entry is stored (a node hooks it into Store.CheckPayloads),
// whoever wrote it: leases must be signed by both parties, vouchers inside
// outcomes and settlements by the renter, for the lease and exact amount
// named (the payload types above, each with its own check), claims and
// proofs must parse (and proofs verify). Reputation (ledger/trust) then
// reads stored entries without checking a signature again. Unknown JSON
// fields are allowed, so that a newer node's entries still replicate; an
// entry that fails here is refused, and with it the rest of its author's
// feed.
func CheckPayload(e *Entry) error {
	switch e.Type {
	case TypeLease:
		l, _, err := auction.DecodeSignedLease(e.Payload, true)
		if err != nil {
			return err
		}
		if e.Author != l.Renter && e.Author != l.Provider {
			return errors.New("journaled by neither party to the lease")
		}
	case TypeSettlement:
		s, err := DecodePayload[Settlement](e.Payload)
		if err != nil {
			return err
		}
		return s.Check(e.Author)
	case TypeOutcome:
		o, err := DecodePayload[Outcome](e.Payload)
		if err != nil {
			return err
		}
		return o.Check(e.Author)
	case TypeHardwareClaim:
		_, err := attest.DecodeClaim(e.Payload)
		return err
	case TypeFraudProof:
		_, err := VerifyAnyProof(e.Payload)
		return err
	case TypeProbe:
		p, err := DecodePayload[Probe](e.Payload)
		if err != nil {
			return err
		}
		return p.Check()
	case TypeTelemetryDigest:
		d, err := DecodePayload[TelemetryDigest](e.Payload)
		if err != nil {
			return err
		}
		return d.Check()
	}
	return nil
}

// checkOutputs accepts no outputs, or one CID of a sane length.
func checkOutputs(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > 128 {
		return fmt.Errorf("outputs: a CID of %d characters", len(s))
	}
	if _, err := cid.Decode(s); err != nil {
		return fmt.Errorf("outputs %q: %v", s, err)
	}
	return nil
}

// Proven reports whether the settlement embeds a voucher its renter signed
// for this lease, provider and total: a provider cannot invent the
// payments that weigh its ratings, nor earnings other nodes would count.
// The voucher's signature was checked when the entry was stored
// (CheckPayload).
func (s *Settlement) Proven(provider string) bool {
	if len(s.Voucher) == 0 {
		return false
	}
	v, err := ReadVoucher(s.Voucher)
	return err == nil && v.Lease == s.Lease && v.Provider == provider && v.Renter == s.Renter && v.Total == s.Total
}
