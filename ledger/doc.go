// Package ledger holds gleaner's trust layer: signed, hash-chained
// per-author feeds and their bbolt store, equivocation proofs that anyone
// can check offline, payment vouchers with double-spend proofs, the
// market's entry payloads (settlements, outcomes, probes, telemetry
// digests) with the check each must pass before it is stored, and the
// per-node reputation computation (beta scores plus personalised
// EigenTrust over paid ratings).
//
// Everything signed here follows the auction package's conventions: the
// body is deterministic CBOR (core deterministic encoding, nil containers
// as empty, integer keys), the signature covers a domain prefix plus the
// body, the object's name is the CIDv1 (dag-cbor, sha2-256) of the body,
// and decoders accept exactly one wire form per value so that a CID
// identifies a single byte string.
package ledger
