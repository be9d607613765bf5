package auction

import (
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Bid is a provider's signed quote for one job: the price per GPU-hour it
// asks for the tier, valid until ValidUntil. Like an offer it is signed in
// canonical CBOR, so the renter can later prove what was bid.
type Bid struct {
	Provider   string  `cbor:"1,keyasint" json:"provider"` // peer ID
	JobID      string  `cbor:"2,keyasint" json:"job_id"`
	Tier       Tier    `cbor:"3,keyasint" json:"tier"`
	Price      Credits `cbor:"4,keyasint" json:"price"` // per GPU-hour
	GPUs       int     `cbor:"5,keyasint" json:"gpus"`
	ValidUntil int64   `cbor:"6,keyasint" json:"valid_until"` // unix seconds
	// Nonce echoes the renter's request for quotes, so that a bid cannot
	// be replayed into another auction round for the same job.
	Nonce []byte `cbor:"7,keyasint" json:"nonce"`
	// GPUHashes names the GPUs the provider will assign (attest.UUIDHash),
	// one per GPU. The lease copies them and the provider refuses an award
	// that names others, so a lease's GPUs are the provider's own
	// statement: what a double-lease proof rests on.
	GPUHashes []string `cbor:"8,keyasint,omitempty" json:"gpu_hashes,omitempty"`
	// SpecHash is the SpecHash of the spec quoted. The lease copies it and
	// the provider starts only that spec.
	SpecHash []byte `cbor:"9,keyasint,omitempty" json:"spec_hash,omitempty"`
	// The terms the provider decides, within the spec it quoted: Start is
	// the window's start (a gold reservation's, or the time of the quote
	// for work that starts now), DurationSec its longest length (the
	// spec's duration.max within the owner's maximum), NoticeSec the
	// preemption notice. An award whose window or notice differs from
	// these is refused, so a renter cannot stretch a five-minute quote
	// into a 700-hour lease or demand a day of notice.
	Start       int64 `cbor:"10,keyasint,omitempty" json:"start,omitempty"`
	DurationSec int64 `cbor:"11,keyasint,omitempty" json:"duration_s,omitempty"`
	NoticeSec   int64 `cbor:"12,keyasint,omitempty" json:"notice_s,omitempty"`
}

// RefusedRaced is a provider's refusal of an award whose bid's GPUs went
// to another award first. It is part of the wire contract: a renter that
// gets it asks for quotes again at once (auction/renter), and the
// provider's scheduler reports it (auction/provider.ErrRaced).
const RefusedRaced = "the GPUs of our bid were leased meanwhile; auction again"

// Decline is a provider's answer when it will not bid; Reason is one of
// the constant Reason* strings, as in a Rejection.
type Decline struct {
	Provider string `json:"provider"`
	JobID    string `json:"job_id"`
	Reason   string `json:"reason"`
}

// SignedBid is a bid's canonical bytes and the provider's signature over
// BidDomain + those bytes.
type SignedBid struct {
	Body []byte `cbor:"1,keyasint"`
	Sig  []byte `cbor:"2,keyasint"`
}

// BidDomain separates bid signatures from offers and every other type.
const BidDomain = "gleaner/bid/v1\x00"

// Bid limits. A valid bid is a few hundred bytes; MaxBidBytes is checked
// before any parsing.
const (
	MaxBidBytes  = 2048
	maxJobID     = 128
	minNonce     = 8
	maxNonce     = 64
	maxSigLength = 512
)

// The sentinels DecodeSignedBid wraps, split as for offers: a bad
// signature is a forgery, an expired bid merely late.
var (
	ErrBidTooLarge     = errors.New("bid too large")
	ErrBadBidEncoding  = errors.New("bid not canonically encoded")
	ErrBadBid          = errors.New("invalid bid")
	ErrBadBidSignature = errors.New("bad bid signature")
	ErrBidExpired      = errors.New("bid expired")
)

func badBid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrBadBid, field, fmt.Sprintf(format, args...))
}

// Validate checks the schema and names the first bad field.
func (b *Bid) Validate() error {
	id, err := peer.Decode(b.Provider)
	if err != nil || id.String() != b.Provider {
		return badBid("provider", "not a canonical peer ID")
	}
	if len(b.JobID) == 0 || len(b.JobID) > maxJobID {
		return badBid("job_id", "must be 1..%d bytes", maxJobID)
	}
	for i := 0; i < len(b.JobID); i++ {
		if c := b.JobID[i]; c < '!' || c > '~' {
			return badBid("job_id", "must be printable ASCII without spaces")
		}
	}
	if tierIndex(b.Tier) < 0 {
		return badBid("tier", "%q: want gold, silver or bronze", b.Tier)
	}
	if b.Price <= 0 || b.Price > maxPrice {
		return badBid("price", "%d out of range (0, %d]", b.Price, maxPrice)
	}
	if b.GPUs < 1 || b.GPUs > MaxGPUs {
		return badBid("gpus", "%d, want 1..%d", b.GPUs, MaxGPUs)
	}
	if b.ValidUntil <= 0 {
		return badBid("valid_until", "must be a positive unix time")
	}
	if len(b.Nonce) < minNonce || len(b.Nonce) > maxNonce {
		return badBid("nonce", "%d bytes, want %d..%d", len(b.Nonce), minNonce, maxNonce)
	}
	if len(b.SpecHash) != 0 && len(b.SpecHash) != SpecHashLen {
		return badBid("spec_hash", "%d bytes, want %d", len(b.SpecHash), SpecHashLen)
	}
	if b.Start < 0 || b.DurationSec < 0 || int64(MaxJobDuration/time.Second) < b.DurationSec || b.NoticeSec < 0 || b.NoticeSec > MaxNoticeSec {
		return badBid("terms", "start %d, duration %d s, notice %d s out of range", b.Start, b.DurationSec, b.NoticeSec)
	}
	if len(b.GPUHashes) > 0 {
		if len(b.GPUHashes) != b.GPUs {
			return badBid("gpu_hashes", "%d hashes for %d GPUs", len(b.GPUHashes), b.GPUs)
		}
		seen := map[string]bool{}
		for _, h := range b.GPUHashes {
			if h == "" || len(h) > 64 || seen[h] {
				return badBid("gpu_hashes", "empty, longer than 64 bytes or repeated")
			}
			seen[h] = true
		}
	}
	return nil
}

// Encode returns the canonical bytes (deterministic CBOR, integer keys).
func (b *Bid) Encode() ([]byte, error) { return encMode.Marshal(b) }

// Marshal is the wire form of a signed bid.
func (s *SignedBid) Marshal() ([]byte, error) { return encMode.Marshal(s) }

// SignBid validates b, checks that key is the provider's and signs
// BidDomain + the canonical body.
func SignBid(b *Bid, key crypto.PrivKey) (*SignedBid, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if id.String() != b.Provider {
		return nil, fmt.Errorf("%w: key is %s, bid names %s", errSignerNotProvider, id, b.Provider)
	}
	body, err := b.Encode()
	if err != nil {
		return nil, fmt.Errorf("encode bid: %w", err)
	}
	sig, err := key.Sign(bidSignedBytes(body))
	if err != nil {
		return nil, fmt.Errorf("sign bid: %w", err)
	}
	return &SignedBid{Body: body, Sig: sig}, nil
}

func bidSignedBytes(body []byte) []byte {
	msg := make([]byte, 0, len(BidDomain)+len(body))
	return append(append(msg, BidDomain...), body...)
}

// DecodeSignedBid checks b completely before returning anything, in the
// order DecodeSignedOffer does and for the same reasons: size; strict,
// bounded decoding (the offer decoder's limits); canonical form of
// envelope and body; schema; the signature by the key inside the
// provider's peer ID; then time, so that ErrBidExpired is only reported
// for authentic bids.
func DecodeSignedBid(data []byte, now time.Time) (*Bid, *SignedBid, error) {
	if len(data) > MaxBidBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBidTooLarge, len(data), MaxBidBytes)
	}
	var s SignedBid
	if err := decMode.Unmarshal(data, &s); err != nil {
		return nil, nil, fmt.Errorf("%w: envelope: %v", ErrBadBidEncoding, err)
	}
	if err := sameEncoding(&s, data); err != nil {
		return nil, nil, fmt.Errorf("%w: envelope %v", ErrBadBidEncoding, err)
	}
	var b Bid
	if err := decMode.Unmarshal(s.Body, &b); err != nil {
		return nil, nil, fmt.Errorf("%w: body: %v", ErrBadBidEncoding, err)
	}
	if err := sameEncoding(&b, s.Body); err != nil {
		return nil, nil, fmt.Errorf("%w: body %v", ErrBadBidEncoding, err)
	}
	if err := b.Validate(); err != nil {
		return nil, nil, err
	}
	if len(s.Sig) == 0 || len(s.Sig) > maxSigLength {
		return nil, nil, fmt.Errorf("%w: signature length %d", ErrBadBidSignature, len(s.Sig))
	}
	pub, err := mustDecodePeer(b.Provider).ExtractPublicKey()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: no public key in provider ID %s: %v", ErrBadBidSignature, b.Provider, err)
	}
	if ok, err := pub.Verify(bidSignedBytes(s.Body), s.Sig); err != nil || !ok {
		return nil, nil, fmt.Errorf("%w: does not verify for provider %s", ErrBadBidSignature, b.Provider)
	}
	if now.Unix() >= b.ValidUntil {
		return nil, nil, fmt.Errorf("%w: at %s (now %s)", ErrBidExpired,
			time.Unix(b.ValidUntil, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return &b, &s, nil
}

// mustDecodePeer decodes a provider ID that Validate has already parsed.
func mustDecodePeer(s string) peer.ID {
	id, _ := peer.Decode(s)
	return id
}
