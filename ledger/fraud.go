package ledger

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The objective faults DESIGN allows automatic penalties for. Each proof
// carries only signed bytes of the accused, so anyone can check it offline.
const (
	ProofEquivocation  = "equivocation"
	ProofDoubleSpend   = "double-spent voucher"
	ProofDoubleLease   = "GPU leased twice"
	ProofContradiction = "telemetry contradicts hardware claim"
)

// Verdict is what a valid proof establishes.
type Verdict struct {
	Kind   string `json:"kind"`
	Author string `json:"author"` // the accused peer
	Detail string `json:"detail,omitempty"`
}

// VerifyAnyProof checks proof bytes of any kind offline. The kinds cannot
// be confused: each embeds a different signed type (entries, vouchers,
// leases, a claim and a sample) and decoding is strict. An invalid proof
// is reported by the kind its bytes are shaped as, so the reason names
// what is wrong with it.
func VerifyAnyProof(b []byte) (Verdict, error) {
	if a, err := VerifyProof(b); err == nil {
		return Verdict{Kind: ProofEquivocation, Author: a}, nil
	}
	if a, err := VerifyDoubleSpend(b); err == nil {
		return Verdict{Kind: ProofDoubleSpend, Author: a}, nil
	}
	if v, err := VerifyDoubleLease(b); err == nil {
		return v, nil
	}
	if v, err := VerifyContradiction(b); err == nil {
		return v, nil
	}
	var pair struct {
		A []byte `cbor:"1,keyasint"`
		B []byte `cbor:"2,keyasint"`
	}
	if len(b) > MaxProofBytes+2*auction.MaxLeaseBytes || decMode.Unmarshal(b, &pair) != nil {
		return Verdict{}, fmt.Errorf("%w: not a fraud proof of any kind (equivocation, double spend, double lease, contradicted claim)", ErrNotAProof)
	}
	kind, err := "", error(nil)
	switch {
	case decodesAs(pair.A, func(x []byte) error { _, _, err := auction.DecodeLeaseUnverified(x); return err }):
		kind, err = ProofDoubleLease, second(VerifyDoubleLease(b))
	case decodesAs(pair.A, func(x []byte) error { _, _, err := DecodeSignedVoucher(x); return err }):
		kind, err = ProofDoubleSpend, second(VerifyDoubleSpend(b))
	case decodesAs(pair.B, func(x []byte) error { _, _, err := attest.DecodeSignedSample(x); return err }):
		kind, err = ProofContradiction, second(VerifyContradiction(b))
	default:
		kind, err = ProofEquivocation, second(VerifyProof(b))
	}
	return Verdict{}, fmt.Errorf("invalid %s proof: %w", kind, err)
}

func decodesAs(b []byte, decode func([]byte) error) bool { return decode(b) == nil }

func second[T any](_ T, err error) error { return err }

// DoubleLeaseProof is two co-signed leases in which one provider gave the
// same GPU exclusively to two leases whose windows overlap. Gold and silver
// are exclusive for their whole window; bronze is preemptible, so a bronze
// lease proves nothing here.
//
// A lease may end early (the job finished, the renter cancelled) and the
// GPU be leased again inside the first window; that is honest. Nodes
// therefore journal this proof only when neither party's feed records the
// first lease ending before the second began (see node's fraud detection);
// the proof itself establishes that the provider signed both.
type DoubleLeaseProof struct {
	A []byte `cbor:"1,keyasint"` // SignedLease wire bytes; A < B bytewise
	B []byte `cbor:"2,keyasint"`
}

// NewDoubleLeaseProof orders the pair so one conflict has one encoding.
func NewDoubleLeaseProof(a, b []byte) *DoubleLeaseProof {
	a, b = ordered(a, b)
	return &DoubleLeaseProof{A: a, B: b}
}

// Marshal is the wire form.
func (p *DoubleLeaseProof) Marshal() ([]byte, error) { return encMode.Marshal(p) }

// VerifyDoubleLease checks a DoubleLeaseProof offline.
func VerifyDoubleLease(b []byte) (Verdict, error) {
	if len(b) > 2*auction.MaxLeaseBytes+64 {
		return Verdict{}, fmt.Errorf("%w: proof too large", ErrNotAProof)
	}
	var p DoubleLeaseProof
	if err := decodeStrict(b, &p); err != nil {
		return Verdict{}, fmt.Errorf("%w: %v", ErrNotAProof, err)
	}
	if bytes.Compare(p.A, p.B) >= 0 {
		return Verdict{}, fmt.Errorf("%w: leases not distinct and ordered", ErrNotAProof)
	}
	la, _, err := auction.DecodeSignedLease(p.A, true)
	if err != nil {
		return Verdict{}, fmt.Errorf("%w: A: %v", ErrNotAProof, err)
	}
	lb, _, err := auction.DecodeSignedLease(p.B, true)
	if err != nil {
		return Verdict{}, fmt.Errorf("%w: B: %v", ErrNotAProof, err)
	}
	gpu, ok := LeasesConflict(la, lb)
	if !ok {
		return Verdict{}, fmt.Errorf("%w: the leases do not conflict", ErrNotAProof)
	}
	return Verdict{Kind: ProofDoubleLease, Author: la.Provider, Detail: fmt.Sprintf(
		"GPU %s given to job %s (%s..%s) and job %s (%s..%s)", gpu,
		la.JobID, utc(la.Start), utc(la.End), lb.JobID, utc(lb.Start), utc(lb.End))}, nil
}

// LeasesConflict reports whether one provider leased one GPU exclusively
// to both a and b for overlapping windows, and which GPU.
func LeasesConflict(a, b *auction.Lease) (string, bool) {
	if a.Provider != b.Provider || a.Tier == auction.Bronze || b.Tier == auction.Bronze {
		return "", false
	}
	if a.Renter == b.Renter && a.JobID == b.JobID && a.Start == b.Start {
		return "", false // one award signed twice is one lease, not two
	}
	if !(a.Start < b.End && b.Start < a.End) {
		return "", false
	}
	for _, g := range a.GPUUUIDHash {
		if slices.Contains(b.GPUUUIDHash, g) {
			return g, true
		}
	}
	return "", false
}

func utc(unix int64) string { return time.Unix(unix, 0).UTC().Format("2006-01-02T15:04:05Z") }

// ContradictionProof is a provider's hardware-claim entry and a telemetry
// sample it signed for one of the claimed GPUs that the claim rules out
// (attest.Contradicts): the provider sells hardware it does not have.
type ContradictionProof struct {
	Claim  []byte `cbor:"1,keyasint"` // SignedEntry wire bytes, type hardware_claim
	Sample []byte `cbor:"2,keyasint"` // attest.SignedSample wire bytes
}

// Marshal is the wire form.
func (p *ContradictionProof) Marshal() ([]byte, error) { return encMode.Marshal(p) }

// VerifyContradiction checks a ContradictionProof offline.
func VerifyContradiction(b []byte) (Verdict, error) {
	if len(b) > MaxEntryBytes+attest.MaxSampleBytes+64 {
		return Verdict{}, fmt.Errorf("%w: proof too large", ErrNotAProof)
	}
	var p ContradictionProof
	if err := decodeStrict(b, &p); err != nil {
		return Verdict{}, fmt.Errorf("%w: %v", ErrNotAProof, err)
	}
	e, _, err := DecodeSignedEntry(p.Claim)
	if err != nil || e.Type != TypeHardwareClaim {
		return Verdict{}, fmt.Errorf("%w: claim is not a signed hardware-claim entry (%v)", ErrNotAProof, err)
	}
	claim, err := attest.DecodeClaim(e.Payload)
	if err != nil {
		return Verdict{}, fmt.Errorf("%w: %v", ErrNotAProof, err)
	}
	pid, err := peer.Decode(e.Author)
	if err != nil {
		return Verdict{}, fmt.Errorf("%w: author: %v", ErrNotAProof, err)
	}
	s, err := attest.VerifySample(p.Sample, pid)
	if err != nil {
		return Verdict{}, fmt.Errorf("%w: sample: %v", ErrNotAProof, err)
	}
	if s.Time < e.Time*1000 {
		// A claim speaks from when it was made; hardware may have changed.
		return Verdict{}, fmt.Errorf("%w: the sample predates the claim", ErrNotAProof)
	}
	g, ok := claim.GPU(s.GPU)
	if !ok {
		return Verdict{}, fmt.Errorf("%w: the claim does not name GPU %s", ErrNotAProof, s.GPU)
	}
	bad, why := attest.Contradicts(g, s)
	if !bad {
		return Verdict{}, fmt.Errorf("%w: the sample is consistent with the claim", ErrNotAProof)
	}
	return Verdict{Kind: ProofContradiction, Author: e.Author, Detail: fmt.Sprintf("GPU %s (%s): %s", s.GPU, g.Model, why)}, nil
}
