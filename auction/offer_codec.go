package auction

import (
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/attest/canon"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The sentinels DecodeSignedOffer wraps, one per way an offer can be bad, so
// that the p2p validator can tell a forger (bad signature: reject and
// penalise) from a late or early message (expired, not yet valid: ignore,
// the sender may simply be slow or skewed) from garbage (encoding, schema).
var (
	ErrOfferTooLarge     = errors.New("offer too large")
	ErrBadEncoding       = errors.New("offer not canonically encoded")
	ErrBadOffer          = errors.New("invalid offer")
	ErrBadSignature      = errors.New("bad offer signature")
	ErrOfferExpired      = errors.New("offer expired")
	ErrOfferNotYetValid  = errors.New("offer issued in the future")
	errSignerNotProvider = errors.New("signing key is not the provider's")
)

// MaxClockSkew is how far in the future an offer's IssuedAt may lie. Without
// it a provider could pre-sign offers valid for years (ExpiresAt is bounded
// only relative to IssuedAt).
const MaxClockSkew = 10 * time.Minute

// CodecDagCBOR is the multicodec of an offer's CID: its body is DAG-CBOR
// compatible (integer keys aside, deterministic CBOR without tags).
const CodecDagCBOR = canon.CodecDagCBOR

// The codec every signed auction type uses: see package canon. Offers are
// decoded with generous bounds (Validate bounds every list much lower) that
// still stop a 64 KiB message from asking for deep recursion or huge
// allocations.
var (
	encMode = canon.Enc
	decMode = canon.Decoder(8, 1024, 64)
)

// Encode returns the offer's canonical bytes: deterministic CBOR (RFC 8949
// core deterministic encoding, integer keys). These are what gets signed
// and what the CID hashes.
func (o *Offer) Encode() ([]byte, error) {
	return encMode.Marshal(o)
}

// CID is CIDv1 (dag-cbor, sha2-256) of the canonical bytes. It returns
// cid.Undef only if the offer cannot be encoded, which a validated offer
// always can.
func (o *Offer) CID() cid.Cid {
	b, err := o.Encode()
	if err != nil {
		return cid.Undef
	}
	return cidOf(b)
}

func cidOf(body []byte) cid.Cid { return canon.CID(body) }

// SignOffer validates o, checks that key is the provider's, and signs
// OfferDomain + the canonical body. Refusing to sign an invalid offer keeps
// a buggy node from gossiping something every peer will penalise it for.
func SignOffer(o *Offer, key crypto.PrivKey) (*SignedOffer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if id.String() != o.Provider {
		return nil, fmt.Errorf("%w: key is %s, offer names %s", errSignerNotProvider, id, o.Provider)
	}
	body, err := o.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode offer: %w", err)
	}
	sig, err := key.Sign(signedBytes(body))
	if err != nil {
		return nil, fmt.Errorf("sign offer: %w", err)
	}
	return &SignedOffer{Body: body, Sig: sig}, nil
}

func signedBytes(body []byte) []byte {
	msg := make([]byte, 0, len(OfferDomain)+len(body))
	return append(append(msg, OfferDomain...), body...)
}

// Marshal is the wire form: the envelope, itself deterministic CBOR.
func (s *SignedOffer) Marshal() ([]byte, error) {
	return encMode.Marshal(s)
}

// CID of a signed offer is the CID of its body, so that re-signing (a
// non-deterministic key type) does not change an offer's identity.
func (s *SignedOffer) CID() cid.Cid { return cidOf(s.Body) }

// DecodeSignedOffer checks b completely before returning anything: size
// before parsing; strict, bounded decoding; canonical form only (decode,
// re-encode, compare bytes, for both envelope and body, so one offer has
// exactly one wire form); schema; signature by the key inside the
// provider's peer ID; then time. The signature is checked before time so
// that ErrOfferExpired is only ever reported for authentic offers.
func DecodeSignedOffer(b []byte, now time.Time) (*Offer, *SignedOffer, error) {
	if len(b) > MaxOfferBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrOfferTooLarge, len(b), MaxOfferBytes)
	}
	var s SignedOffer
	if err := decMode.Unmarshal(b, &s); err != nil {
		return nil, nil, fmt.Errorf("%w: envelope: %v", ErrBadEncoding, err)
	}
	if err := sameEncoding(&s, b); err != nil {
		return nil, nil, fmt.Errorf("%w: envelope %v", ErrBadEncoding, err)
	}
	var o Offer
	if err := decMode.Unmarshal(s.Body, &o); err != nil {
		return nil, nil, fmt.Errorf("%w: body: %v", ErrBadEncoding, err)
	}
	if err := sameEncoding(&o, s.Body); err != nil {
		return nil, nil, fmt.Errorf("%w: body %v", ErrBadEncoding, err)
	}
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	if err := verify(&o, &s); err != nil {
		return nil, nil, err
	}
	if o.Expired(now) {
		return nil, nil, fmt.Errorf("%w: at %s (now %s)", ErrOfferExpired,
			time.Unix(o.ExpiresAt, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if time.Unix(o.IssuedAt, 0).After(now.Add(MaxClockSkew)) {
		return nil, nil, fmt.Errorf("%w: issued %s (now %s)", ErrOfferNotYetValid,
			time.Unix(o.IssuedAt, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return &o, &s, nil
}

func sameEncoding(v any, b []byte) error { return canon.Same(v, b) }

// verify checks the signature with the public key inlined in the provider's
// peer ID; identities whose keys are too large to inline (RSA) cannot sign
// offers, which keeps verification free of any key lookup.
func verify(o *Offer, s *SignedOffer) error {
	if len(s.Sig) == 0 || len(s.Sig) > 512 {
		return fmt.Errorf("%w: signature length %d", ErrBadSignature, len(s.Sig))
	}
	id, err := peer.Decode(o.Provider)
	if err != nil { // Validate already parsed it; kept for callers of verify alone
		return fmt.Errorf("%w: provider: %v", ErrBadOffer, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return fmt.Errorf("%w: no public key in provider ID %s: %v", ErrBadSignature, o.Provider, err)
	}
	ok, err := pub.Verify(signedBytes(s.Body), s.Sig)
	if err != nil || !ok {
		return fmt.Errorf("%w: does not verify for provider %s", ErrBadSignature, o.Provider)
	}
	return nil
}
