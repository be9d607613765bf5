package ledger

import (
	"bytes"
	"errors"
	"fmt"
)

// EquivocationProof is two signed entries by one author at one Seq with
// different bodies. It needs nothing but its own bytes to check, so any
// node can verify it offline and freeze the author's feed.
type EquivocationProof struct {
	A []byte `cbor:"1,keyasint"` // wire bytes of a SignedEntry
	B []byte `cbor:"2,keyasint"` // the conflicting one; A < B bytewise
}

// MaxProofBytes bounds an encoded proof: two entries plus framing.
const MaxProofBytes = 2*MaxEntryBytes + 64

// ErrNotAProof wraps every reason a claimed proof is refused.
var ErrNotAProof = errors.New("not an equivocation proof")

// NewEquivocationProof orders the pair so that one conflict has exactly
// one proof encoding (and one CID), however it was discovered.
func NewEquivocationProof(a, b []byte) *EquivocationProof {
	a, b = ordered(a, b)
	return &EquivocationProof{A: a, B: b}
}

// ordered puts a pair of proof parts in byte order, so that one conflict
// has exactly one proof encoding (and one CID) whichever side was found
// first. Every two-part proof is built through it.
func ordered(a, b []byte) ([]byte, []byte) {
	if bytes.Compare(a, b) > 0 {
		return b, a
	}
	return a, b
}

// Marshal is the wire form.
func (p *EquivocationProof) Marshal() ([]byte, error) { return encMode.Marshal(p) }

// VerifyProof checks proof bytes offline and returns the equivocating
// author. Both entries must verify on their own, name the same author and
// Seq, and have different bodies: the same entry twice (or re-signed with
// a randomised signature scheme) proves nothing.
func VerifyProof(b []byte) (string, error) {
	if len(b) > MaxProofBytes {
		return "", fmt.Errorf("%w: %d bytes", ErrNotAProof, len(b))
	}
	var p EquivocationProof
	if err := decodeStrict(b, &p); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotAProof, err)
	}
	return p.verify()
}

func (p *EquivocationProof) verify() (string, error) {
	if bytes.Compare(p.A, p.B) >= 0 {
		return "", fmt.Errorf("%w: entries not distinct and ordered", ErrNotAProof)
	}
	ea, sa, err := DecodeSignedEntry(p.A)
	if err != nil {
		return "", fmt.Errorf("%w: A: %v", ErrNotAProof, err)
	}
	eb, sb, err := DecodeSignedEntry(p.B)
	if err != nil {
		return "", fmt.Errorf("%w: B: %v", ErrNotAProof, err)
	}
	if ea.Author != eb.Author {
		return "", fmt.Errorf("%w: different authors", ErrNotAProof)
	}
	if ea.Seq != eb.Seq {
		return "", fmt.Errorf("%w: different seq %d, %d", ErrNotAProof, ea.Seq, eb.Seq)
	}
	if bytes.Equal(sa.Body, sb.Body) {
		return "", fmt.Errorf("%w: same entry", ErrNotAProof)
	}
	return ea.Author, nil
}
