package attest

import (
	"fmt"
	"math"
)

// Digest summarises one billing interval of a telemetry chain for the
// ledger: the feed stores this instead of every sample, and Last commits
// to the whole chain up to ToSeq, so any sample can later be proven part
// of (or missing from) what was billed.
type Digest struct {
	Lease    string  `cbor:"1,keyasint" json:"lease"`
	FromSeq  uint64  `cbor:"2,keyasint" json:"from_seq"`
	ToSeq    uint64  `cbor:"3,keyasint" json:"to_seq"`
	Last     []byte  `cbor:"4,keyasint" json:"last"` // BodyHash of sample ToSeq
	AvgUtil  float64 `cbor:"5,keyasint" json:"avg_util_pct"`
	MaxTemp  int     `cbor:"6,keyasint" json:"max_temp_c"`
	AvgPower float64 `cbor:"7,keyasint" json:"avg_power_w"`
	Count    int     `cbor:"8,keyasint" json:"count"`
	// Simulated is true if any sample was, so a simulated interval is
	// never billed or rated as real hardware.
	Simulated bool `cbor:"9,keyasint" json:"simulated"`
}

// Summarise digests samples a Verifier accepted, in the order accepted.
// It trusts that order (the Verifier already enforced the chain); an empty
// slice gives the zero Digest. Last is the hash of the last sample's
// canonical body, which re-encoding reproduces exactly because only
// canonical bodies are accepted.
func Summarise(samples []*Sample) Digest {
	var d Digest
	if len(samples) == 0 {
		return d
	}
	first, last := samples[0], samples[len(samples)-1]
	d.Lease, d.FromSeq, d.ToSeq, d.Count = first.Lease, first.Seq, last.Seq, len(samples)
	var util, power float64
	d.MaxTemp = math.MinInt
	for _, s := range samples {
		util += float64(s.UtilPct)
		power += s.PowerW
		d.MaxTemp = max(d.MaxTemp, s.TempC)
		d.Simulated = d.Simulated || s.Simulated
	}
	d.AvgUtil = util / float64(len(samples))
	d.AvgPower = power / float64(len(samples))
	if body, err := last.Encode(); err == nil {
		d.Last = BodyHash(body)
	}
	return d
}

// HardwareClaim is what a provider said it sells, as recorded in its feed.
type HardwareClaim struct {
	Model       string  `cbor:"1,keyasint" json:"model"`
	VRAMMiB     int     `cbor:"2,keyasint" json:"vram_mib"`
	PowerLimitW float64 `cbor:"3,keyasint" json:"power_limit_w"`
	Simulated   bool    `cbor:"4,keyasint" json:"simulated"`
	UUIDHash    string  `cbor:"5,keyasint,omitempty" json:"gpu,omitempty"` // as in telemetry and leases
}

// PowerMargin is how far above the power limit a reading may go before it
// contradicts the claim. Owners raise limits (a 450 W RTX 4090 allows up
// to 600 W, factory-overclocked boards more), boards overshoot briefly and
// sensors are not exact; but a card drawing half again what its model can
// is a bigger card. Only that is objective enough to convict.
const PowerMargin = 0.50

// Contradicts reports whether a signed sample proves the claim false, and
// why. Only objective contradictions count (DESIGN: automatic penalties
// only for objective proofs): memory in use above the claimed VRAM, power
// above the limit plus PowerMargin, or a simulated sample against a claim
// of real hardware (or the reverse). The power limit is the claim's own,
// or the claimed model's stock limit where the claim leaves it zero.
func Contradicts(claim HardwareClaim, s *Sample) (bool, string) {
	if s == nil {
		return false, ""
	}
	if s.Simulated && !claim.Simulated {
		return true, "sample is from a simulated GPU but the claim is real hardware"
	}
	if !s.Simulated && claim.Simulated {
		return true, "sample claims real hardware but the claim is a simulated GPU"
	}
	if claim.VRAMMiB > 0 && s.MemUsedMiB > claim.VRAMMiB {
		return true, fmt.Sprintf("memory used %d MiB exceeds claimed VRAM %d MiB", s.MemUsedMiB, claim.VRAMMiB)
	}
	// The larger of the claimed (enforced at start-up) and the model's
	// stock limit: an owner who lowered the limit may raise it again.
	limit := max(claim.PowerLimitW, catalogue[claim.Model].PowerLimitW)
	if limit > 0 && s.PowerW > limit*(1+PowerMargin) {
		return true, fmt.Sprintf("power %s W exceeds the %s limit %s W by more than %d%%",
			watts(s.PowerW), claim.Model, watts(limit), int(PowerMargin*100))
	}
	return false, ""
}
