package auction

import (
	"errors"
	"fmt"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Lease is the contract between a renter and the provider that won its
// auction: price, tier, window, notice and billing interval. The renter
// signs it as the award; the provider's counter-signature makes it a lease.
// Both sides keep the co-signed bytes; its CID names it everywhere.
type Lease struct {
	JobID       string   `cbor:"1,keyasint" json:"job_id"`
	Network     string   `cbor:"2,keyasint" json:"network"`
	Renter      string   `cbor:"3,keyasint" json:"renter"`   // peer ID
	Provider    string   `cbor:"4,keyasint" json:"provider"` // peer ID
	Tier        Tier     `cbor:"5,keyasint" json:"tier"`
	Price       Credits  `cbor:"6,keyasint" json:"price"` // per GPU-hour, the clearing price
	GPUs        int      `cbor:"7,keyasint" json:"gpus"`
	Start       int64    `cbor:"8,keyasint" json:"start"` // unix seconds
	End         int64    `cbor:"9,keyasint" json:"end"`   // the job is stopped at End
	NoticeSec   int64    `cbor:"10,keyasint" json:"notice_s"`
	BillingSec  int64    `cbor:"11,keyasint" json:"billing_interval_s"`
	Bid         []byte   `cbor:"12,keyasint" json:"bid"` // the winning SignedBid's wire bytes
	GPUUUIDHash []string `cbor:"13,keyasint,omitempty" json:"gpu_uuid_hashes,omitempty"`
	// SpecHash is the winning bid's: the provider runs only this spec.
	SpecHash []byte `cbor:"14,keyasint,omitempty" json:"spec_hash,omitempty"`
}

// SignedLease carries the canonical lease body and both signatures over
// LeaseDomain + body. ProviderSig is empty until the provider accepts.
type SignedLease struct {
	Body        []byte `cbor:"1,keyasint"`
	RenterSig   []byte `cbor:"2,keyasint"`
	ProviderSig []byte `cbor:"3,keyasint,omitempty"`
}

// LeaseDomain separates lease signatures from every other signed type.
const LeaseDomain = "gleaner/lease/v1\x00"

// MaxLeaseBytes bounds an encoded SignedLease.
const MaxLeaseBytes = 16 << 10

// ErrBadLease wraps every reason a lease is refused.
var ErrBadLease = errors.New("invalid lease")

// Validate checks the lease's own consistency.
func (l *Lease) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrBadLease, fmt.Sprintf(f, a...)) }
	if l.JobID == "" || len(l.JobID) > 128 {
		return bad("job_id: 1..128 characters")
	}
	for name, id := range map[string]string{"renter": l.Renter, "provider": l.Provider} {
		if _, err := peer.Decode(id); err != nil {
			return bad("%s: not a peer ID", name)
		}
	}
	if l.Renter == l.Provider {
		return bad("renter and provider are the same peer")
	}
	if l.Tier != Gold && l.Tier != Silver && l.Tier != Bronze {
		return bad("tier %q", l.Tier)
	}
	if l.Price <= 0 || l.GPUs < 1 || l.GPUs > MaxGPUs {
		return bad("price %d, gpus %d", l.Price, l.GPUs)
	}
	if l.End <= l.Start || time.Duration(l.End-l.Start)*time.Second > MaxJobDuration {
		return bad("window %d..%d", l.Start, l.End)
	}
	if len(l.SpecHash) != 0 && len(l.SpecHash) != SpecHashLen {
		return bad("spec_hash: %d bytes, want %d", len(l.SpecHash), SpecHashLen)
	}
	if l.NoticeSec < 0 || l.BillingSec <= 0 || len(l.Bid) == 0 || len(l.Bid) > MaxBidBytes {
		return bad("notice %d, billing interval %d, bid %d bytes", l.NoticeSec, l.BillingSec, len(l.Bid))
	}
	return nil
}

// Encode is the lease's canonical body.
func (l *Lease) Encode() ([]byte, error) { return encMode.Marshal(l) }

// CID names the lease by its body.
func (s *SignedLease) CID() cid.Cid { return cidOf(s.Body) }

// Marshal is the wire form.
func (s *SignedLease) Marshal() ([]byte, error) { return encMode.Marshal(s) }

func leaseMsg(body []byte) []byte {
	return append([]byte(LeaseDomain), body...)
}

// ProposeLease is the renter's award: the lease signed by the renter.
func ProposeLease(l *Lease, renterKey crypto.PrivKey) (*SignedLease, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if id, err := peer.IDFromPrivateKey(renterKey); err != nil || id.String() != l.Renter {
		return nil, fmt.Errorf("%w: signing key is not the renter's", ErrBadLease)
	}
	body, err := l.Encode()
	if err != nil {
		return nil, err
	}
	sig, err := renterKey.Sign(leaseMsg(body))
	if err != nil {
		return nil, err
	}
	return &SignedLease{Body: body, RenterSig: sig}, nil
}

// CounterSign adds the provider's signature to a proposal it has checked.
func (s *SignedLease) CounterSign(providerKey crypto.PrivKey) error {
	sig, err := providerKey.Sign(leaseMsg(s.Body))
	if err != nil {
		return err
	}
	s.ProviderSig = sig
	return nil
}

// DecodeSignedLease checks a lease from the wire: size, strict canonical
// decoding, schema, the renter's signature and, when cosigned is set, the
// provider's too.
func DecodeSignedLease(b []byte, cosigned bool) (*Lease, *SignedLease, error) {
	l, s, err := DecodeLeaseUnverified(b)
	if err != nil {
		return nil, nil, err
	}
	if err := verifyBy(l.Renter, s.Body, s.RenterSig); err != nil {
		return nil, nil, fmt.Errorf("%w: renter signature: %v", ErrBadLease, err)
	}
	if cosigned {
		if err := verifyBy(l.Provider, s.Body, s.ProviderSig); err != nil {
			return nil, nil, fmt.Errorf("%w: provider signature: %v", ErrBadLease, err)
		}
	}
	return l, s, nil
}

// ReadLease decodes lease bytes that were checked in full before (a node
// stores leases only after DecodeSignedLease): no canonical-form, schema
// or signature checks, for scans over many stored leases.
func ReadLease(b []byte) (*Lease, *SignedLease, error) {
	var s SignedLease
	if err := decMode.Unmarshal(b, &s); err != nil {
		return nil, nil, fmt.Errorf("%w: envelope: %v", ErrBadLease, err)
	}
	var l Lease
	if err := decMode.Unmarshal(s.Body, &l); err != nil {
		return nil, nil, fmt.Errorf("%w: body: %v", ErrBadLease, err)
	}
	return &l, &s, nil
}

// DecodeLeaseUnverified is DecodeSignedLease without the signatures: for
// a scan over many stored leases that only needs their fields, where the
// few that decide something are verified afterwards (DecodeSignedLease).
func DecodeLeaseUnverified(b []byte) (*Lease, *SignedLease, error) {
	if len(b) > MaxLeaseBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBadLease, len(b), MaxLeaseBytes)
	}
	l, s, err := ReadLease(b)
	if err != nil {
		return nil, nil, err
	}
	if err := sameEncoding(l, s.Body); err != nil {
		return nil, nil, fmt.Errorf("%w: body %v", ErrBadLease, err)
	}
	if err := l.Validate(); err != nil {
		return nil, nil, err
	}
	return l, s, nil
}

func verifyBy(id string, body, sig []byte) error {
	pid, err := peer.Decode(id)
	if err != nil {
		return err
	}
	pk, err := pid.ExtractPublicKey()
	if err != nil {
		return err
	}
	if len(sig) == 0 || len(sig) > 512 {
		return errors.New("missing or oversized signature")
	}
	ok, err := pk.Verify(leaseMsg(body), sig)
	if err != nil || !ok {
		return errors.New("does not verify")
	}
	return nil
}
