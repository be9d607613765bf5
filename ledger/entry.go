package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// EntryDomain separates feed-entry signatures from every other signed type.
const EntryDomain = "gleaner/entry/v1\x00"

// MaxEntryBytes bounds an encoded SignedEntry. Entries carry digests and
// references, not bulk data; the bound keeps gossip and storage cheap and
// lets a receiver refuse garbage before parsing it.
const MaxEntryBytes = 64 << 10

// ErrBadEntry wraps every schema violation.
var ErrBadEntry = errors.New("invalid entry")

// Entry types. Unknown types are refused rather than stored opaquely: a new
// type needs every validator upgraded first, like a new field does.
const (
	TypeHardwareClaim   = "hardware_claim"
	TypeLease           = "lease"
	TypeTelemetryDigest = "telemetry_digest"
	TypeProbe           = "probe"
	TypeVoucher         = "voucher"
	TypeSettlement      = "settlement"
	TypeOutcome         = "outcome"
	TypeRating          = "rating"
	TypeFraudProof      = "fraud_proof"
)

var knownTypes = map[string]bool{
	TypeHardwareClaim: true, TypeLease: true, TypeTelemetryDigest: true,
	TypeProbe: true, TypeVoucher: true, TypeSettlement: true,
	TypeOutcome: true, TypeRating: true, TypeFraudProof: true,
}

// Entry is one link of an author's feed. Prev names the previous entry by
// CID so that the feed is a hash chain: rewriting history changes every
// later CID, and two entries at one Seq are proof of equivocation.
type Entry struct {
	Author  string `cbor:"1,keyasint" json:"author"` // peer ID with inline key
	Seq     uint64 `cbor:"2,keyasint" json:"seq"`    // 1-based
	Prev    string `cbor:"3,keyasint" json:"prev"`   // CID of entry Seq-1, "" for Seq 1
	Type    string `cbor:"4,keyasint" json:"type"`
	Time    int64  `cbor:"5,keyasint" json:"time"` // unix seconds, author's clock
	Payload []byte `cbor:"6,keyasint" json:"payload"`
}

// SignedEntry is the wire and storage form: canonical body plus the
// author's signature over EntryDomain + body.
type SignedEntry struct {
	Body []byte `cbor:"1,keyasint"`
	Sig  []byte `cbor:"2,keyasint"`
}

// Encode returns the canonical body bytes.
func (e *Entry) Encode() ([]byte, error) { return encMode.Marshal(e) }

// CID names the entry; cid.Undef only if it cannot be encoded.
func (e *Entry) CID() cid.Cid {
	b, err := e.Encode()
	if err != nil {
		return cid.Undef
	}
	return cidOf(b)
}

// CID of a signed entry is that of its body, so re-signing with a
// non-deterministic key type does not rename the entry.
func (s *SignedEntry) CID() cid.Cid { return cidOf(s.Body) }

// Marshal is the wire form.
func (s *SignedEntry) Marshal() ([]byte, error) { return encMode.Marshal(s) }

// Validate checks the entry's schema; it does not check the signature or
// the chain (the Store does that against its head).
func (e *Entry) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: %s", ErrBadEntry, fmt.Sprintf(f, a...)) }
	if _, err := checkPeerID(e.Author); err != nil {
		return bad("author: %v", err)
	}
	if e.Seq == 0 {
		return bad("seq 0")
	}
	if e.Seq == 1 && e.Prev != "" {
		return bad("seq 1 with prev")
	}
	if e.Seq > 1 {
		if err := checkCID(e.Prev); err != nil {
			return bad("prev: %v", err)
		}
	}
	if !knownTypes[e.Type] {
		return bad("unknown type %q", e.Type)
	}
	if e.Time <= 0 {
		return bad("time %d", e.Time)
	}
	return nil
}

// NewEntry builds and signs the entry following prev (nil for a feed's
// first entry). prev must be the author's own current head; the Store
// re-checks that on Append.
func NewEntry(key crypto.PrivKey, prev *Entry, typ string, payload []byte, now time.Time) (*Entry, *SignedEntry, error) {
	author, err := signerID(key)
	if err != nil {
		return nil, nil, err
	}
	e := &Entry{Author: author, Seq: 1, Type: typ, Time: now.Unix(), Payload: payload}
	if prev != nil {
		if prev.Author != author {
			return nil, nil, fmt.Errorf("%w: prev is by %s, key is %s", ErrBadEntry, prev.Author, author)
		}
		pc := prev.CID()
		if !pc.Defined() {
			return nil, nil, fmt.Errorf("%w: prev does not encode", ErrBadEntry)
		}
		e.Seq, e.Prev = prev.Seq+1, pc.String()
	}
	if err := e.Validate(); err != nil {
		return nil, nil, err
	}
	body, err := e.Encode()
	if err != nil {
		return nil, nil, err
	}
	sig, err := key.Sign(domainMsg(EntryDomain, body))
	if err != nil {
		return nil, nil, err
	}
	se := &SignedEntry{Body: body, Sig: sig}
	// Refusing to hand out what peers would refuse (size) beats finding out
	// after gossip.
	if w, err := se.Marshal(); err != nil || len(w) > MaxEntryBytes {
		return nil, nil, fmt.Errorf("%w: too large (%d bytes)", ErrBadEntry, len(w))
	}
	return e, se, nil
}

// DecodeSignedEntry checks b completely before returning anything: size
// before parsing; strict, bounded, canonical decoding of envelope and body;
// schema; then the signature by the key inlined in the author's peer ID.
func DecodeSignedEntry(b []byte) (*Entry, *SignedEntry, error) {
	e, s, err := decodeEntryUnverified(b)
	if err != nil {
		return nil, nil, err
	}
	pk, _ := checkPeerID(e.Author) // Validate accepted it
	if err := verifySig(pk, EntryDomain, s.Body, s.Sig); err != nil {
		return nil, nil, fmt.Errorf("entry by %s: %w", e.Author, err)
	}
	return e, s, nil
}

// decodeEntryUnverified is DecodeSignedEntry minus the signature, for
// bytes read back from our own store (verified when they were appended).
func decodeEntryUnverified(b []byte) (*Entry, *SignedEntry, error) {
	if len(b) > MaxEntryBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBadEntry, len(b), MaxEntryBytes)
	}
	var s SignedEntry
	if err := decodeStrict(b, &s); err != nil {
		return nil, nil, fmt.Errorf("entry envelope: %w", err)
	}
	var e Entry
	if err := decodeStrict(s.Body, &e); err != nil {
		return nil, nil, fmt.Errorf("entry body: %w", err)
	}
	if err := e.Validate(); err != nil {
		return nil, nil, err
	}
	return &e, &s, nil
}
