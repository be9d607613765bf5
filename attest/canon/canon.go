// Package canon is gleaner's one canonical encoding for everything that is
// signed (offers, bids, leases, ledger entries, vouchers, telemetry):
// deterministic CBOR, strict decoding of hostile input, a re-encoding check
// that allows exactly one wire form per value, and CIDs over the same
// bytes. Each signed type keeps its own domain prefix and limits; the rules
// live here once so that they can never drift apart.
package canon

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// CodecDagCBOR is the multicodec of every body's CID: integer keys aside,
// the bodies are deterministic, tag-free DAG-CBOR.
const CodecDagCBOR = 0x71

// Enc is the canonical encoder: RFC 8949 core deterministic encoding, with
// nil and empty containers encoded alike so that a value has one signable
// form and one CID.
var Enc = func() cbor.EncMode {
	eo := cbor.CoreDetEncOptions()
	eo.NilContainers = cbor.NilContainerAsEmpty
	m, err := eo.EncMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// Decoder is a strict decoder for hostile input: duplicate map keys,
// indefinite lengths, tags, invalid UTF-8 and unknown fields are errors
// (a signature must cover everything a node stores and forwards), and
// nesting and sizes are bounded by the caller's limits.
func Decoder(maxNested, maxArrayElements, maxMapPairs int) cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:   maxNested,
		MaxArrayElements:  maxArrayElements,
		MaxMapPairs:       maxMapPairs,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// ErrNotCanonical is returned by Same for bytes that decode but are not
// the value's one canonical form.
var ErrNotCanonical = errors.New("is not in canonical form")

// Same reports whether v re-encodes to exactly b.
func Same(v any, b []byte) error {
	again, err := Enc.Marshal(v)
	if err != nil {
		return fmt.Errorf("does not re-encode: %v", err)
	}
	if !bytes.Equal(again, b) {
		return ErrNotCanonical
	}
	return nil
}

// CID is CIDv1 dag-cbor sha2-256 of a canonical body.
func CID(body []byte) cid.Cid {
	h, err := mh.Sum(body, mh.SHA2_256, -1)
	if err != nil { // only for unknown hash functions
		panic(err)
	}
	return cid.NewCidV1(CodecDagCBOR, h)
}
