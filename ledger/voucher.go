package ledger

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// VoucherDomain separates voucher signatures from every other signed type.
const VoucherDomain = "gleaner/voucher/v1\x00"

// MaxVoucherBytes bounds an encoded SignedVoucher; vouchers are small and
// frequent (one per billing interval), so the bound is tight.
const MaxVoucherBytes = 2 << 10

// Voucher errors.
var (
	ErrBadVoucher  = errors.New("invalid voucher")
	ErrStale       = errors.New("voucher superseded by a higher nonce")
	ErrRegress     = errors.New("voucher total below an earlier one")
	ErrDoubleSpend = errors.New("conflicting vouchers for one nonce")
)

// Voucher is the renter's promise that the provider has earned Total
// (cumulative) on one payment lane of a lease. Cumulative totals mean the
// provider only ever needs the latest voucher, and a lost one costs
// nothing; Nonce orders them.
type Voucher struct {
	Lease    string          `cbor:"1,keyasint" json:"lease"` // CID of the co-signed lease
	Lane     uint32          `cbor:"2,keyasint" json:"lane"`
	Nonce    uint64          `cbor:"3,keyasint" json:"nonce"`
	Total    auction.Credits `cbor:"4,keyasint" json:"total"`
	Renter   string          `cbor:"5,keyasint" json:"renter"`
	Provider string          `cbor:"6,keyasint" json:"provider"`
}

// SignedVoucher is the wire form, signed by the renter.
type SignedVoucher struct {
	Body []byte `cbor:"1,keyasint"`
	Sig  []byte `cbor:"2,keyasint"`
}

// Marshal is the wire form.
func (s *SignedVoucher) Marshal() ([]byte, error) { return encMode.Marshal(s) }

// CID names the voucher by its body.
func (s *SignedVoucher) CID() cid.Cid { return cidOf(s.Body) }

// Validate checks the voucher's schema (not the signature).
func (v *Voucher) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrBadVoucher, fmt.Sprintf(f, a...)) }
	if err := checkCID(v.Lease); err != nil {
		return bad("lease: %v", err)
	}
	if _, err := checkPeerID(v.Renter); err != nil {
		return bad("renter: %v", err)
	}
	if _, err := checkPeerID(v.Provider); err != nil {
		return bad("provider: %v", err)
	}
	if v.Renter == v.Provider {
		return bad("renter pays itself")
	}
	if v.Total < 0 {
		return bad("negative total %d", v.Total)
	}
	return nil
}

// SignVoucher validates v, checks the key is the renter's and signs.
func SignVoucher(v *Voucher, key crypto.PrivKey) (*SignedVoucher, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	id, err := signerID(key)
	if err != nil {
		return nil, err
	}
	if id != v.Renter {
		return nil, fmt.Errorf("%w: key is %s, renter is %s", ErrBadVoucher, id, v.Renter)
	}
	body, err := encMode.Marshal(v)
	if err != nil {
		return nil, err
	}
	sig, err := key.Sign(domainMsg(VoucherDomain, body))
	if err != nil {
		return nil, err
	}
	return &SignedVoucher{Body: body, Sig: sig}, nil
}

// ReadVoucher decodes a voucher checked before (size, canonical encoding,
// schema, signature) without checking any of it again: for vouchers inside
// ledger entries whose payloads were checked when stored.
func ReadVoucher(b []byte) (*Voucher, error) {
	if len(b) > MaxVoucherBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBadVoucher, len(b), MaxVoucherBytes)
	}
	var s SignedVoucher
	if err := decMode.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("voucher envelope: %w", err)
	}
	var v Voucher
	if err := decMode.Unmarshal(s.Body, &v); err != nil {
		return nil, fmt.Errorf("voucher body: %w", err)
	}
	return &v, nil
}

// DecodeSignedVoucher checks size, canonical encoding, schema and the
// renter's signature before returning anything.
func DecodeSignedVoucher(b []byte) (*Voucher, *SignedVoucher, error) {
	if len(b) > MaxVoucherBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBadVoucher, len(b), MaxVoucherBytes)
	}
	var s SignedVoucher
	if err := decodeStrict(b, &s); err != nil {
		return nil, nil, fmt.Errorf("voucher envelope: %w", err)
	}
	var v Voucher
	if err := decodeStrict(s.Body, &v); err != nil {
		return nil, nil, fmt.Errorf("voucher body: %w", err)
	}
	if err := v.Validate(); err != nil {
		return nil, nil, err
	}
	pk, _ := checkPeerID(v.Renter) // Validate accepted it
	if err := verifySig(pk, VoucherDomain, s.Body, s.Sig); err != nil {
		return nil, nil, fmt.Errorf("voucher by %s: %w", v.Renter, err)
	}
	return &v, &s, nil
}

// DoubleSpendProof is two vouchers signed by one renter for the same
// lease, lane and nonce with different bodies (typically different
// totals): the renter promised two amounts for one step, an objective
// fault anyone can check offline.
type DoubleSpendProof struct {
	A []byte `cbor:"1,keyasint"` // SignedVoucher wire bytes; A < B bytewise
	B []byte `cbor:"2,keyasint"`
}

func newDoubleSpendProof(a, b []byte) *DoubleSpendProof {
	a, b = ordered(a, b)
	return &DoubleSpendProof{A: a, B: b}
}

// Marshal is the wire form.
func (p *DoubleSpendProof) Marshal() ([]byte, error) { return encMode.Marshal(p) }

// VerifyDoubleSpend checks proof bytes offline and returns the renter.
func VerifyDoubleSpend(b []byte) (string, error) {
	if len(b) > 2*MaxVoucherBytes+64 {
		return "", fmt.Errorf("%w: proof too large", ErrNotAProof)
	}
	var p DoubleSpendProof
	if err := decodeStrict(b, &p); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotAProof, err)
	}
	return p.verify()
}

func (p *DoubleSpendProof) verify() (string, error) {
	if bytes.Compare(p.A, p.B) >= 0 {
		return "", fmt.Errorf("%w: vouchers not distinct and ordered", ErrNotAProof)
	}
	va, sa, err := DecodeSignedVoucher(p.A)
	if err != nil {
		return "", fmt.Errorf("%w: A: %v", ErrNotAProof, err)
	}
	vb, sb, err := DecodeSignedVoucher(p.B)
	if err != nil {
		return "", fmt.Errorf("%w: B: %v", ErrNotAProof, err)
	}
	if va.Renter != vb.Renter || va.Lease != vb.Lease || va.Lane != vb.Lane || va.Nonce != vb.Nonce {
		return "", fmt.Errorf("%w: vouchers are for different steps", ErrNotAProof)
	}
	if bytes.Equal(sa.Body, sb.Body) {
		return "", fmt.Errorf("%w: same voucher", ErrNotAProof)
	}
	return va.Renter, nil
}
