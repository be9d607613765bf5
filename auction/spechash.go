package auction

import (
	"crypto/sha256"
	"fmt"

	"gopkg.in/yaml.v3"
)

// ReservedEnvPrefix starts the names of the variables a provider's
// executor gives every job; a spec may not set them.
const ReservedEnvPrefix = "GLEANER_"

// MaxNoticeSec bounds a preemption notice, in offers, bids and leases: an
// hour is more than any checkpoint needs, and a provider holds a stopped
// job's GPUs for the notice.
const MaxNoticeSec = 3600

// SpecHashLen is the length of a SpecHash.
const SpecHashLen = sha256.Size

// SpecHash names a job spec by its content: sha256 of its normalised YAML
// (MarshalYAML), so that the same spec hashes the same however the renter
// wrote it. A bid names the hash of the spec it quoted and the lease
// copies it; the provider runs only a spec with that hash, so a renter
// cannot quote a harmless spec and start another.
func SpecHash(s *JobSpec) ([]byte, error) {
	b, err := yaml.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode the job spec: %w", err)
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}
