package renting

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/repo"
)

// CanaryRate is the probability of sending a known-answer job along with a
// job awarded to a provider that has passed streak canaries in a row since
// its last failure: 1 for a provider never checked, falling as 1/(1+streak)
// to minRate, and back to 1 after a failure (BOINC's adaptive
// replication, applied to known answers).
func CanaryRate(streak int, minRate float64) float64 {
	return max(minRate, 1/float64(1+max(streak, 0)))
}

// canaryPlan is this renter's known-answer job (trust.canary_spec) and the
// providers it is checking right now (one canary per provider at a time).
type canaryPlan struct {
	spec    []byte
	minRate float64
	draw    func() float64 // uniform in [0,1); replaced in tests

	mu       sync.Mutex
	inFlight map[string]bool
}

// loadCanary reads and checks the canary spec: it must parse and carry a
// known answer, or the node refuses to start (a canary that cannot fail
// checks nothing).
func loadCanary(path string, minRate float64) (*canaryPlan, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trust.canary_spec: %w", err)
	}
	spec, err := auction.ParseJobSpec(b)
	if err != nil {
		return nil, fmt.Errorf("trust.canary_spec %s: %w", path, err)
	}
	if spec.Verify.ExpectSHA256 == "" {
		return nil, fmt.Errorf("trust.canary_spec %s: a canary needs verify.expect_sha256, the sha256 of its correct output", path)
	}
	if spec.Verify.Replicas > 1 {
		return nil, fmt.Errorf("trust.canary_spec %s: a canary runs on the provider it checks; remove verify.replicas", path)
	}
	if minRate == 0 {
		minRate = repo.DefaultCanaryMinRate
	}
	return &canaryPlan{spec: b, minRate: minRate, draw: rand.Float64, inFlight: map[string]bool{}}, nil
}

// maybeCanary sends the canary to a provider just awarded a job, at the
// provider's current CanaryRate.
func (r *Jobs) maybeCanary(provider string) {
	c := r.canary
	if c == nil {
		return
	}
	streak := 0
	if r.claims != nil {
		streak = r.claims.canaryStreak(provider)
	}
	if c.draw() >= CanaryRate(streak, c.minRate) {
		return
	}
	c.mu.Lock()
	busy := c.inFlight[provider]
	c.inFlight[provider] = true
	c.mu.Unlock()
	if busy {
		return
	}
	j, err := r.Submit(c.spec, nil, SubmitOptions{Provider: provider, Canary: true})
	if err != nil {
		c.finished(provider)
		r.log.Warn("canary not submitted", "provider", provider, "err", err)
		return
	}
	r.log.Info("checking a provider with a canary", "provider", provider, "job", j.ID, "streak", streak)
}

func (c *canaryPlan) finished(provider string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.inFlight, provider)
	c.mu.Unlock()
}
