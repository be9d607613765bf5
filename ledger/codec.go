package ledger

import (
	"errors"
	"fmt"

	"github.com/gleaner-net/gleaner/attest/canon"
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

// The codec every signed ledger type uses: see package canon.
var (
	encMode = canon.Enc
	decMode = canon.Decoder(8, 1024, 64)
)

// cidOf is CIDv1 dag-cbor sha2-256, the same naming the auction uses.
func cidOf(body []byte) cid.Cid { return canon.CID(body) }

// decodeStrict decodes b into v and insists that v re-encodes to exactly b,
// so that every accepted value has a single wire form.
func decodeStrict(b []byte, v any) error {
	if err := decMode.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadEncoding, err)
	}
	if err := canon.Same(v, b); err != nil {
		return fmt.Errorf("%w: %v", ErrBadEncoding, err)
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
