package renting

import (
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/libp2p/go-libp2p/core/peer"
)

// telemetry verifies one run's samples as they arrive: one chain per GPU,
// each sample signed by the provider, echoing this run's nonce, in order.
type telemetry struct {
	provider peer.ID
	lease    string
	nonce    []byte
	chains   map[string]*attest.Verifier
	sum      ledger.TelemetrySummary
	utilSum  float64
	// claimOf finds the provider's hardware claim (nil: no check), and
	// onProof receives the one contradiction proof a run can produce.
	claimOf func(provider string) (claimRef, bool)
	onProof func(proof []byte)
	proved  bool
}

func newTelemetry(provider peer.ID, lease string, nonce []byte) *telemetry {
	return &telemetry{provider: provider, lease: lease, nonce: nonce, chains: map[string]*attest.Verifier{}}
}

// accept checks one raw sample; a rejected sample is counted, never used.
func (t *telemetry) accept(raw []byte) {
	s, _, err := attest.DecodeSignedSample(raw)
	if err == nil {
		v, ok := t.chains[s.GPU]
		if !ok {
			if v, err = attest.NewVerifier(t.provider, t.lease, t.nonce); err == nil {
				t.chains[s.GPU] = v
			}
		}
		if err == nil {
			s, err = v.Accept(raw, time.Now())
		}
	}
	if err != nil {
		t.sum.Rejected++
		t.sum.LastRejection = err.Error()
		return
	}
	t.sum.Samples++
	t.utilSum += float64(s.UtilPct)
	t.sum.AvgUtilPct = t.utilSum / float64(t.sum.Samples)
	t.sum.MaxTempC = max(t.sum.MaxTempC, s.TempC)
	t.sum.Simulated = t.sum.Simulated || s.Simulated
	t.checkClaim(raw, s)
}

// checkClaim compares a verified sample with the provider's hardware
// claim; the first contradiction becomes an offline-verifiable proof.
func (t *telemetry) checkClaim(raw []byte, s *attest.Sample) {
	if t.proved || t.claimOf == nil {
		return
	}
	c, ok := t.claimOf(t.provider.String())
	if !ok || s.Time < c.time*1000 {
		return
	}
	g, ok := c.claim.GPU(s.GPU)
	if !ok {
		return
	}
	bad, why := attest.Contradicts(g, s)
	if !bad {
		return
	}
	proof, err := (&ledger.ContradictionProof{Claim: c.raw, Sample: raw}).Marshal()
	if err != nil {
		return
	}
	t.proved, t.sum.Contradiction = true, why
	if t.onProof != nil {
		t.onProof(proof)
	}
}
