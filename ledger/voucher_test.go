package ledger

import (
	"errors"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func idOf(t testing.TB, k crypto.PrivKey) string {
	t.Helper()
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

type voucherFixture struct {
	renter           crypto.PrivKey
	lease            string
	renterID, provID string
}

func newVoucherFixture(t testing.TB) *voucherFixture {
	r := newKey(t)
	return &voucherFixture{
		renter:   r,
		lease:    cidOf([]byte("a lease")).String(),
		renterID: idOf(t, r),
		provID:   idOf(t, newKey(t)),
	}
}

func (f *voucherFixture) sign(t testing.TB, lane uint32, nonce uint64, total auction.Credits) *SignedVoucher {
	t.Helper()
	sv, err := SignVoucher(&Voucher{Lease: f.lease, Lane: lane, Nonce: nonce, Total: total, Renter: f.renterID, Provider: f.provID}, f.renter)
	if err != nil {
		t.Fatal(err)
	}
	return sv
}

func TestVoucherBook(t *testing.T) {
	f := newVoucherFixture(t)
	vb := NewVoucherBook()
	for n, total := range []auction.Credits{100, 250, 250, 400} {
		if _, err := vb.Accept(f.sign(t, 0, uint64(n), total)); err != nil {
			t.Fatalf("nonce %d: %v", n, err)
		}
	}
	if _, err := vb.Accept(f.sign(t, 0, 3, 400)); err != nil {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := vb.Accept(f.sign(t, 0, 1, 250)); err != nil {
		t.Fatalf("old duplicate: %v", err)
	}
	if _, err := vb.Accept(f.sign(t, 0, 4, 399)); !errors.Is(err, ErrRegress) {
		t.Fatalf("regress: %v", err)
	}
	if _, err := vb.Accept(f.sign(t, 1, 0, 5)); err != nil {
		t.Fatalf("lanes are independent: %v", err)
	}
	p, err := vb.Accept(f.sign(t, 0, 3, 900))
	if !errors.Is(err, ErrDoubleSpend) || p == nil {
		t.Fatalf("double spend: %v", err)
	}
	w, _ := p.Marshal()
	if who, err := VerifyDoubleSpend(w); err != nil || who != f.renterID {
		t.Fatalf("proof: %q %v", who, err)
	}
	if best, _, _ := vb.Best(f.lease, 0); best.Total != 400 {
		t.Fatalf("best total %d", best.Total)
	}
	if _, ok := vb.DoubleSpent(f.lease, 0); !ok {
		t.Fatal("proof not recorded")
	}
	// A stranger cannot sign into the renter's lane.
	g := *f
	g.renter = newKey(t)
	g.renterID = idOf(t, g.renter)
	if _, err := vb.Accept(g.sign(t, 0, 9, 1000)); !errors.Is(err, ErrBadVoucher) {
		t.Fatalf("stranger: %v", err)
	}
}

func TestDoubleSpendProofNegative(t *testing.T) {
	f := newVoucherFixture(t)
	a, _ := f.sign(t, 0, 1, 10).Marshal()
	b, _ := f.sign(t, 0, 2, 20).Marshal()
	c, _ := f.sign(t, 1, 1, 20).Marshal()
	for name, p := range map[string]*DoubleSpendProof{
		"same voucher":   {A: a, B: a},
		"other nonce":    newDoubleSpendProof(a, b),
		"other lane":     newDoubleSpendProof(a, c),
		"not a voucher":  {A: []byte{1}, B: []byte{2}},
		"wrong ordering": {A: newDoubleSpendProof(a, b).B, B: newDoubleSpendProof(a, b).A},
	} {
		w, _ := p.Marshal()
		if _, err := VerifyDoubleSpend(w); !errors.Is(err, ErrNotAProof) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestVoucherRejects(t *testing.T) {
	f := newVoucherFixture(t)
	if _, err := SignVoucher(&Voucher{Lease: f.lease, Total: 1, Renter: f.renterID, Provider: f.renterID}, f.renter); !errors.Is(err, ErrBadVoucher) {
		t.Fatalf("self-pay: %v", err)
	}
	if _, err := SignVoucher(&Voucher{Lease: "x", Total: 1, Renter: f.renterID, Provider: f.provID}, f.renter); !errors.Is(err, ErrBadVoucher) {
		t.Fatalf("bad lease: %v", err)
	}
	sv := f.sign(t, 0, 1, 10)
	sv.Sig[0] ^= 1
	w, _ := sv.Marshal()
	if _, _, err := DecodeSignedVoucher(w); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered: %v", err)
	}
}

func FuzzDecodeSignedVoucher(f *testing.F) {
	fx := newVoucherFixture(f)
	w, _ := fx.sign(f, 3, 7, 1_500_000).Marshal()
	f.Add(w)
	f.Add([]byte{0xa2, 0x01, 0x40, 0x02, 0x40})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, sv, err := DecodeSignedVoucher(b)
		if err != nil {
			return
		}
		if err := v.Validate(); err != nil {
			t.Fatal(err)
		}
		if w, err := sv.Marshal(); err != nil || string(w) != string(b) {
			t.Fatal("accepted bytes are not canonical")
		}
	})
}
