package auction

import (
	"bytes"
	"testing"
)

// signedLeaseWire is a co-signed lease carrying a spec hash, as a provider
// receives and stores it.
func signedLeaseWire(t testing.TB) []byte {
	t.Helper()
	rk, renter := testKey(t, 7)
	pk, provider := testKey(t, 8)
	l := &Lease{JobID: "job-1", Network: "testnet", Renter: renter, Provider: provider, Tier: Bronze, Price: 1_000_000, GPUs: 1,
		Start: t0.Unix(), End: t0.Unix() + 300, NoticeSec: 60, BillingSec: 300, Bid: []byte{1, 2, 3},
		GPUUUIDHash: []string{"abc"}, SpecHash: bytes.Repeat([]byte{9}, SpecHashLen)}
	sl, err := ProposeLease(l, rk)
	if err != nil {
		t.Fatal(err)
	}
	if err := sl.CounterSign(pk); err != nil {
		t.Fatal(err)
	}
	raw, err := sl.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestLeaseSpecHashIsSignedAndChecked(t *testing.T) {
	raw := signedLeaseWire(t)
	l, _, err := DecodeSignedLease(raw, true)
	if err != nil || !bytes.Equal(l.SpecHash, bytes.Repeat([]byte{9}, SpecHashLen)) {
		t.Fatalf("%+v %v", l, err)
	}
	rk, renter := testKey(t, 7)
	_, provider := testKey(t, 8)
	bad := &Lease{JobID: "j", Network: "n", Renter: renter, Provider: provider, Tier: Bronze, Price: 1, GPUs: 1,
		Start: 1, End: 2, BillingSec: 1, Bid: []byte{1}, SpecHash: []byte{1, 2}}
	if _, err := ProposeLease(bad, rk); err == nil {
		t.Fatal("a lease with a 2-byte spec hash was signed")
	}
}

// FuzzDecodeSignedLease: whatever a peer sends as a lease, an accepted one
// is canonical, valid and co-signed, and decodes again byte for byte.
func FuzzDecodeSignedLease(f *testing.F) {
	wire := signedLeaseWire(f)
	f.Add(wire)
	f.Add(wire[:len(wire)/2])
	f.Add([]byte{0xa3, 0x01, 0x40, 0x02, 0x40, 0x03, 0x40})
	f.Fuzz(func(t *testing.T, data []byte) {
		l, s, err := DecodeSignedLease(data, true)
		if err != nil {
			if l != nil || s != nil {
				t.Fatal("returned a lease with an error")
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatal(err)
		}
		again, _ := s.Marshal()
		if !bytes.Equal(again, data) {
			t.Fatal("accepted a non-canonical encoding")
		}
	})
}
