package attest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gleaner-net/gleaner/attest/canon"
)

// TelemetryDomain separates telemetry signatures from every other type the
// node's key signs (offers, feed entries), so a signed sample can never be
// passed off as something else, nor the reverse.
const TelemetryDomain = "gleaner/telemetry/v1\x00"

// MaxSampleBytes bounds a signed sample on the wire. A valid one is a few
// hundred bytes; checking the size before parsing keeps a hostile provider
// from making the renter parse megabytes.
const MaxSampleBytes = 4 << 10

// MaxSampleSkew is how far ahead of the renter's clock a sample may be
// stamped. More than that is a provider pre-signing readings it has not
// taken, or a clock too wrong to bill against.
const MaxSampleSkew = 30 * time.Second

// Field bounds. They are loose enough for any real reading and tight
// enough that a sample cannot carry garbage the ledger has to store.
const (
	maxLeaseLen = 128
	maxGPULen   = 64
	minNonceLen = 8 // a renter nonce shorter than this could be guessed and pre-signed
	maxNonceLen = 64
	maxPowerW   = 100000
)

// Sample is one telemetry reading of one leased GPU. It echoes the
// renter's nonce and is chained to the previous sample by hash, so a
// provider can neither replay samples from another lease nor rewrite its
// history after the fact.
type Sample struct {
	Lease      string  `cbor:"1,keyasint" json:"lease"`
	GPU        string  `cbor:"2,keyasint" json:"gpu"`  // UUIDHash of the device
	Seq        uint64  `cbor:"3,keyasint" json:"seq"`  // 1, 2, 3, ... per lease and GPU
	Prev       []byte  `cbor:"4,keyasint" json:"prev"` // sha256 of the previous body; empty for seq 1
	Nonce      []byte  `cbor:"5,keyasint" json:"nonce"`
	Time       int64   `cbor:"6,keyasint" json:"time"` // unix milliseconds
	UtilPct    int     `cbor:"7,keyasint" json:"util_pct"`
	MemUsedMiB int     `cbor:"8,keyasint" json:"mem_used_mib"`
	TempC      int     `cbor:"9,keyasint" json:"temp_c"`
	PowerW     float64 `cbor:"10,keyasint" json:"power_w"`
	// Simulated travels in every sample so that telemetry from a simulated
	// GPU can never be billed or rated as real hardware.
	Simulated bool `cbor:"11,keyasint" json:"simulated"`
}

// SignedSample is the wire envelope: the canonical body and the provider's
// signature over TelemetryDomain + body.
type SignedSample struct {
	Body []byte `cbor:"1,keyasint"`
	Sig  []byte `cbor:"2,keyasint"`
}

// The sentinels, one per way a sample can be refused, so the renter can
// tell forgery (penalise), replay and chain breaks (fraud evidence) from
// garbage or a skewed clock.
var (
	ErrSampleTooLarge = errors.New("telemetry sample too large")
	ErrSampleEncoding = errors.New("telemetry sample not canonically encoded")
	ErrBadSample      = errors.New("invalid telemetry sample")
	ErrSampleSig      = errors.New("bad telemetry signature")
	ErrWrongLease     = errors.New("telemetry sample for another lease")
	ErrWrongNonce     = errors.New("telemetry sample echoes another nonce")
	ErrWrongGPU       = errors.New("telemetry sample for another GPU")
	ErrReplayedSample = errors.New("telemetry sample replayed (sequence already seen)")
	ErrSampleGap      = errors.New("telemetry sample out of order (sequence gap)")
	ErrBrokenChain    = errors.New("telemetry sample does not chain to the previous one")
	ErrTimeBackwards  = errors.New("telemetry sample time went backwards")
	ErrSampleFuture   = errors.New("telemetry sample stamped in the future")
)

// Telemetry uses the canonical codec of every signed type (package
// canon). Samples come from the provider, the party telemetry must keep
// honest: they are decoded with tight bounds.
var (
	telEnc = canon.Enc
	telDec = canon.Decoder(4, 16, 16)
)

// UUIDHash is how a GPU is named in telemetry: enough to tell one GPU from
// another (and one GPU leased twice) without publishing its serial. It
// matches the hash offers carry (hex of the first 16 bytes of sha256).
func UUIDHash(uuid string) string {
	sum := sha256.Sum256([]byte(uuid))
	return hex.EncodeToString(sum[:16])
}

// Encode returns the sample's canonical bytes, the ones signed and hashed.
func (s *Sample) Encode() ([]byte, error) { return telEnc.Marshal(s) }

// Marshal is the wire form of the envelope, itself canonical CBOR.
func (s *SignedSample) Marshal() ([]byte, error) { return telEnc.Marshal(s) }

// BodyHash is what the next sample's Prev must equal.
func BodyHash(body []byte) []byte {
	sum := sha256.Sum256(body)
	return sum[:]
}

func telemetrySigned(body []byte) []byte {
	msg := make([]byte, 0, len(TelemetryDomain)+len(body))
	return append(append(msg, TelemetryDomain...), body...)
}

// Validate checks the sample's own fields, independent of any chain.
func (s *Sample) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadSample, fmt.Sprintf(format, a...))
	}
	switch {
	case s.Lease == "" || len(s.Lease) > maxLeaseLen:
		return bad("lease length %d not in 1..%d", len(s.Lease), maxLeaseLen)
	case s.GPU == "" || len(s.GPU) > maxGPULen:
		return bad("gpu length %d not in 1..%d", len(s.GPU), maxGPULen)
	case s.Seq == 0:
		return bad("seq 0; sequences start at 1")
	case s.Seq == 1 && len(s.Prev) != 0:
		return bad("seq 1 has a previous hash")
	case s.Seq > 1 && len(s.Prev) != sha256.Size:
		return bad("prev hash length %d, want %d", len(s.Prev), sha256.Size)
	case len(s.Nonce) < minNonceLen || len(s.Nonce) > maxNonceLen:
		return bad("nonce length %d not in %d..%d", len(s.Nonce), minNonceLen, maxNonceLen)
	case s.Time <= 0:
		return bad("time %d not positive", s.Time)
	case s.UtilPct < 0 || s.UtilPct > 100:
		return bad("utilisation %d%% not in 0..100", s.UtilPct)
	case s.MemUsedMiB < 0:
		return bad("memory used %d MiB negative", s.MemUsedMiB)
	case s.TempC < -60 || s.TempC > 200:
		return bad("temperature %d°C not physical", s.TempC)
	case math.IsNaN(s.PowerW) || s.PowerW < 0 || s.PowerW > maxPowerW:
		return bad("power %v W not in 0..%d", s.PowerW, maxPowerW)
	}
	return nil
}

// DecodeSignedSample parses and checks one wire sample without any chain
// state: size first, strict bounded decoding, canonical form only for both
// envelope and body (so one sample has exactly one wire form and one
// hash), then the schema. It does not check the signature: the caller
// knows whose it must be (see Verifier).
func DecodeSignedSample(raw []byte) (*Sample, *SignedSample, error) {
	if len(raw) > MaxSampleBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, limit %d", ErrSampleTooLarge, len(raw), MaxSampleBytes)
	}
	var env SignedSample
	if err := telDec.Unmarshal(raw, &env); err != nil {
		return nil, nil, fmt.Errorf("%w: envelope: %v", ErrSampleEncoding, err)
	}
	if err := sameTelemetryEncoding(&env, raw); err != nil {
		return nil, nil, fmt.Errorf("%w: envelope %v", ErrSampleEncoding, err)
	}
	var s Sample
	if err := telDec.Unmarshal(env.Body, &s); err != nil {
		return nil, nil, fmt.Errorf("%w: body: %v", ErrSampleEncoding, err)
	}
	if err := sameTelemetryEncoding(&s, env.Body); err != nil {
		return nil, nil, fmt.Errorf("%w: body %v", ErrSampleEncoding, err)
	}
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	if len(env.Sig) == 0 || len(env.Sig) > 512 {
		return nil, nil, fmt.Errorf("%w: signature length %d", ErrSampleSig, len(env.Sig))
	}
	return &s, &env, nil
}

func sameTelemetryEncoding(v any, b []byte) error { return canon.Same(v, b) }
