package attest

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gleaner-net/gleaner/attest/canon"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Claim is the payload of a hardware-claim ledger entry: the GPUs a
// provider binds to its identity, each named by UUIDHash. Telemetry names
// the same hashes, so a signed sample can be checked against the claim
// (Contradicts), and leases name them too, so one GPU leased twice for one
// window shows.
type Claim struct {
	GPUs      []HardwareClaim `cbor:"1,keyasint" json:"gpus"`
	Driver    string          `cbor:"2,keyasint,omitempty" json:"driver,omitempty"`
	Simulated bool            `cbor:"3,keyasint" json:"simulated"`
}

// MaxClaimGPUs bounds a claim: more GPUs than any one host carries is a
// malformed claim, not a big machine.
const MaxClaimGPUs = 64

// ErrBadClaim wraps every reason a claim is refused.
var ErrBadClaim = errors.New("invalid hardware claim")

var claimDec = canon.Decoder(4, MaxClaimGPUs, 16)

// ClaimOf states what an inventory snapshot holds. The power limit is the
// board's own where the driver reports one; Contradicts falls back to the
// model's stock limit otherwise.
func ClaimOf(inv Inventory) Claim {
	c := Claim{Driver: inv.DriverVersion, Simulated: inv.Simulated}
	for _, g := range inv.GPUs {
		c.GPUs = append(c.GPUs, HardwareClaim{
			UUIDHash: UUIDHash(g.UUID), Model: g.Model, VRAMMiB: g.VRAMMiB,
			PowerLimitW: g.PowerLimitW, Simulated: g.Simulated || inv.Simulated,
		})
	}
	slices.SortFunc(c.GPUs, func(a, b HardwareClaim) int { return strings.Compare(a.UUIDHash, b.UUIDHash) })
	return c
}

// Encode is the canonical payload.
func (c Claim) Encode() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return telEnc.Marshal(c)
}

// Validate checks the claim's own shape: bounded, one entry per GPU, and
// a simulated machine never claims a real GPU.
func (c Claim) Validate() error {
	if len(c.GPUs) > MaxClaimGPUs || len(c.Driver) > 64 {
		return fmt.Errorf("%w: %d GPUs, driver %d bytes", ErrBadClaim, len(c.GPUs), len(c.Driver))
	}
	seen := map[string]bool{}
	for _, g := range c.GPUs {
		switch {
		case g.UUIDHash == "" || len(g.UUIDHash) > maxGPULen || seen[g.UUIDHash]:
			return fmt.Errorf("%w: GPU hash %q missing, too long or repeated", ErrBadClaim, g.UUIDHash)
		case g.Model == "" || len(g.Model) > 64 || g.VRAMMiB < 0 || g.PowerLimitW < 0 || g.PowerLimitW > maxPowerW:
			return fmt.Errorf("%w: GPU %s: model %q, %d MiB, %v W", ErrBadClaim, g.UUIDHash, g.Model, g.VRAMMiB, g.PowerLimitW)
		case c.Simulated && !g.Simulated:
			return fmt.Errorf("%w: a simulated machine claims real GPU %s", ErrBadClaim, g.UUIDHash)
		}
		seen[g.UUIDHash] = true
	}
	return nil
}

// DecodeClaim parses a claim payload strictly (bounded, canonical).
func DecodeClaim(b []byte) (Claim, error) {
	var c Claim
	if len(b) > 16<<10 {
		return c, fmt.Errorf("%w: %d bytes", ErrBadClaim, len(b))
	}
	if err := claimDec.Unmarshal(b, &c); err != nil {
		return Claim{}, fmt.Errorf("%w: %v", ErrBadClaim, err)
	}
	if err := sameTelemetryEncoding(c, b); err != nil {
		return Claim{}, fmt.Errorf("%w: %v", ErrBadClaim, err)
	}
	return c, c.Validate()
}

// GPU returns the claim for one GPU hash.
func (c Claim) GPU(hash string) (HardwareClaim, bool) {
	for _, g := range c.GPUs {
		if g.UUIDHash == hash {
			return g, true
		}
	}
	return HardwareClaim{}, false
}

// Equal reports whether two claims state the same hardware, so that a
// restart journals a new claim only when something changed.
func (c Claim) Equal(o Claim) bool {
	return c.Driver == o.Driver && c.Simulated == o.Simulated && slices.Equal(c.GPUs, o.GPUs)
}

// VerifySample checks that raw is a well-formed sample signed by provider,
// with no chain state: what an offline fraud proof needs.
func VerifySample(raw []byte, provider peer.ID) (*Sample, error) {
	s, env, err := DecodeSignedSample(raw)
	if err != nil {
		return nil, err
	}
	pub, err := provider.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: provider key: %v", ErrSampleSig, err)
	}
	if ok, err := pub.Verify(telemetrySigned(env.Body), env.Sig); err != nil || !ok {
		return nil, fmt.Errorf("%w: does not verify for the provider", ErrSampleSig)
	}
	return s, nil
}
