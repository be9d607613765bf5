package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// cosigned builds a lease between renter and provider for gpus over
// [start, start+dur) and returns its wire bytes.
func cosigned(t *testing.T, renter, provider crypto.PrivKey, job string, tier auction.Tier, start time.Time, dur time.Duration, gpus ...string) []byte {
	t.Helper()
	l := &auction.Lease{
		JobID: job, Network: "test", Renter: idOf(t, renter), Provider: idOf(t, provider),
		Tier: tier, Price: 1_000_000, GPUs: len(gpus), Start: start.Unix(), End: start.Add(dur).Unix(),
		BillingSec: 60, Bid: []byte("bid"), GPUUUIDHash: gpus,
	}
	sl, err := auction.ProposeLease(l, renter)
	if err != nil {
		t.Fatal(err)
	}
	if err := sl.CounterSign(provider); err != nil {
		t.Fatal(err)
	}
	raw, err := sl.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestDoubleLeaseProof(t *testing.T) {
	prov, r1, r2 := newKey(t), newKey(t), newKey(t)
	t0 := time.Now().Truncate(time.Second)
	a := cosigned(t, r1, prov, "job-a", auction.Silver, t0, time.Hour, "gpu0", "gpu1")
	b := cosigned(t, r2, prov, "job-b", auction.Gold, t0.Add(30*time.Minute), time.Hour, "gpu1")
	raw, err := NewDoubleLeaseProof(b, a).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	v, err := VerifyAnyProof(raw)
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind != ProofDoubleLease || v.Author != idOf(t, prov) || !strings.Contains(v.Detail, "gpu1") {
		t.Fatalf("verdict %+v", v)
	}

	refused := map[string][]byte{
		"bronze is preemptible":  cosigned(t, r2, prov, "job-c", auction.Bronze, t0.Add(time.Minute), time.Hour, "gpu1"),
		"windows do not overlap": cosigned(t, r2, prov, "job-d", auction.Silver, t0.Add(time.Hour), time.Hour, "gpu1"),
		"other GPUs":             cosigned(t, r2, prov, "job-e", auction.Silver, t0, time.Hour, "gpu2"),
		"other provider":         cosigned(t, r2, newKey(t), "job-f", auction.Silver, t0, time.Hour, "gpu1"),
	}
	for name, other := range refused {
		p, _ := NewDoubleLeaseProof(a, other).Marshal()
		if _, err := VerifyDoubleLease(p); !errors.Is(err, ErrNotAProof) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
	// The same lease twice, and a renter-only signature, prove nothing.
	if p, _ := (&DoubleLeaseProof{A: a, B: a}).Marshal(); func() bool { _, err := VerifyDoubleLease(p); return err == nil }() {
		t.Error("one lease twice accepted")
	}
	l, sl, _ := auction.DecodeSignedLease(b, true)
	sl.ProviderSig = nil
	half, _ := sl.Marshal()
	if p, _ := NewDoubleLeaseProof(a, half).Marshal(); func() bool { _, err := VerifyDoubleLease(p); return err == nil }() {
		t.Errorf("lease %s without the provider's signature accepted", l.JobID)
	}
}

func TestContradictionProof(t *testing.T) {
	prov := newKey(t)
	inv := attest.Inventory{Source: "fake", DriverVersion: "555.1", GPUs: []attest.GPU{
		{UUID: "GPU-real-1", Model: "RTX4090", VRAMMiB: 24564, PowerLimitW: 450},
	}}
	claim := attest.ClaimOf(inv)
	payload, err := claim.Encode()
	if err != nil {
		t.Fatal(err)
	}
	_, entry, err := NewEntry(prov, nil, TypeHardwareClaim, payload, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	claimRaw, _ := entry.Marshal()
	sample := func(key crypto.PrivKey, g attest.GPU) []byte {
		s, err := attest.NewSampler(key, "lease-1", []byte("0123456789abcdef"), attest.UUIDHash(g.UUID))
		if err != nil {
			t.Fatal(err)
		}
		_, raw, err := s.Sign(g, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	proof := func(s []byte) []byte {
		b, err := (&ContradictionProof{Claim: claimRaw, Sample: s}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// A "4090" that uses 80 GB is a bigger card than the one claimed.
	big := inv.GPUs[0]
	big.VRAMMiB, big.VRAMFreeMiB = 81920, 1000
	v, err := VerifyAnyProof(proof(sample(prov, big)))
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind != ProofContradiction || v.Author != idOf(t, prov) || !strings.Contains(v.Detail, "memory") {
		t.Fatalf("verdict %+v", v)
	}

	// A sample from before the claim was made is not held against it.
	if _, err := VerifyContradiction(proof(func() []byte {
		s, err := attest.NewSampler(prov, "lease-1", []byte("0123456789abcdef"), attest.UUIDHash(big.UUID))
		if err != nil {
			t.Fatal(err)
		}
		_, raw, err := s.Sign(big, time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}())); !errors.Is(err, ErrNotAProof) {
		t.Errorf("a sample older than the claim convicted: %v", err)
	}
	honest := inv.GPUs[0]
	honest.VRAMFreeMiB, honest.PowerW = 20000, 300
	if _, err := VerifyContradiction(proof(sample(prov, honest))); !errors.Is(err, ErrNotAProof) {
		t.Errorf("a consistent sample convicted: %v", err)
	}
	// Someone else's key cannot frame the provider.
	if _, err := VerifyContradiction(proof(sample(newKey(t), big))); !errors.Is(err, ErrNotAProof) {
		t.Errorf("a sample by another key accepted: %v", err)
	}
	other := big
	other.UUID = "GPU-not-claimed"
	if _, err := VerifyContradiction(proof(sample(prov, other))); !errors.Is(err, ErrNotAProof) {
		t.Errorf("a sample for an unclaimed GPU accepted: %v", err)
	}
}

func FuzzVerifyAnyProof(f *testing.F) {
	f.Add([]byte{0xa2, 0x01, 0x40, 0x02, 0x41, 0x00})
	f.Add([]byte("not cbor"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := VerifyAnyProof(b)
		if err == nil && (v.Author == "" || v.Kind == "") {
			t.Fatalf("accepted proof without an accused: %+v", v)
		}
	})
}

// A proof that is shaped right but proves nothing says why, in its own terms.
func TestInvalidProofNamesItsKind(t *testing.T) {
	prov, r1, r2 := newKey(t), newKey(t), newKey(t)
	t0 := time.Now().Truncate(time.Second)
	a := cosigned(t, r1, prov, "a", auction.Silver, t0, time.Hour, "gpu0")
	b := cosigned(t, r2, prov, "b", auction.Silver, t0.Add(2*time.Hour), time.Hour, "gpu0")
	p, _ := NewDoubleLeaseProof(a, b).Marshal()
	_, err := VerifyAnyProof(p)
	if err == nil || !strings.Contains(err.Error(), "invalid GPU leased twice proof") || !strings.Contains(err.Error(), "do not conflict") {
		t.Fatalf("error for two leases that do not overlap: %v", err)
	}
	if _, err := VerifyAnyProof([]byte("junk")); err == nil || !strings.Contains(err.Error(), "not a fraud proof of any kind") {
		t.Fatalf("error for junk: %v", err)
	}
}
