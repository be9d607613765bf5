package ledger

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"
)

// ErrBadSignature is wrapped whenever a signature does not verify, so that
// a gossip validator can penalise forgers differently from garbage.
var ErrBadSignature = errors.New("bad signature")

// ErrBadEncoding is wrapped when bytes are not the one canonical form.
var ErrBadEncoding = errors.New("not canonically encoded")

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	eo := cbor.CoreDetEncOptions()
	// nil and empty must encode alike, or one value would have two CIDs.
	eo.NilContainers = cbor.NilContainerAsEmpty
	var err error
	if encMode, err = eo.EncMode(); err != nil {
		panic(err)
	}
	// Input is hostile: bounded nesting and sizes, no tags, no indefinite
	// lengths, and unknown fields are errors because the signature must
	// cover everything a node stores and forwards.
	decMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:   8,
		MaxArrayElements:  1024,
		MaxMapPairs:       64,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// cidOf is CIDv1 dag-cbor sha2-256, the same naming the auction uses.
func cidOf(body []byte) cid.Cid {
	h, err := mh.Sum(body, mh.SHA2_256, -1)
	if err != nil { // only for unknown hash functions
		panic(err)
	}
	return cid.NewCidV1(auction.CodecDagCBOR, h)
}

// decodeStrict decodes b into v and insists that v re-encodes to exactly b,
// so that every accepted value has a single wire form.
func decodeStrict(b []byte, v any) error {
	if err := decMode.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadEncoding, err)
	}
	again, err := encMode.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: does not re-encode: %v", ErrBadEncoding, err)
	}
	if !bytes.Equal(again, b) {
		return fmt.Errorf("%w: not in canonical form", ErrBadEncoding)
	}
	return nil
}

func domainMsg(domain string, body []byte) []byte {
	msg := make([]byte, 0, len(domain)+len(body))
	return append(append(msg, domain...), body...)
}

// checkPeerID accepts only peer IDs that inline their public key, so that
// every signature in the ledger verifies from the bytes alone, offline.
func checkPeerID(s string) (crypto.PubKey, error) {
	id, err := peer.Decode(s)
	if err != nil {
		return nil, err
	}
	if id.String() != s {
		return nil, errors.New("peer ID not in canonical string form")
	}
	pk, err := id.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("no inline public key: %v", err)
	}
	return pk, nil
}

// checkCID accepts only the CIDs this ledger produces, in canonical
// string form, so that equal references compare equal as strings.
func checkCID(s string) error {
	c, err := cid.Decode(s)
	if err != nil {
		return err
	}
	if c.Version() != 1 || c.Type() != auction.CodecDagCBOR || c.String() != s {
		return errors.New("not a canonical CIDv1 dag-cbor")
	}
	if d, err := mh.Decode(c.Hash()); err != nil || d.Code != mh.SHA2_256 || d.Length != 32 {
		return errors.New("not sha2-256")
	}
	return nil
}

func verifySig(pk crypto.PubKey, domain string, body, sig []byte) error {
	if len(sig) == 0 || len(sig) > 512 {
		return fmt.Errorf("%w: length %d", ErrBadSignature, len(sig))
	}
	ok, err := pk.Verify(domainMsg(domain, body), sig)
	if err != nil || !ok {
		return ErrBadSignature
	}
	return nil
}

func signerID(key crypto.PrivKey) (string, error) {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("signing key: %w", err)
	}
	return id.String(), nil
}
