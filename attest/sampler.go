package attest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// Sampler is the provider's side of one GPU's telemetry chain for one
// lease: it numbers, chains and signs readings. Safe for concurrent use.
type Sampler struct {
	key   crypto.PrivKey
	lease string
	nonce []byte
	gpu   string

	mu       sync.Mutex // guards the chain state below
	seq      uint64     // last signed sequence number, 0 before the first
	prev     []byte     // hash of the last signed body
	lastTime int64      // unix ms of the last signed sample
}

// NewSampler starts a chain for lease, echoing the renter's nonce, for the
// GPU whose UUIDHash is gpuUUIDHash.
func NewSampler(key crypto.PrivKey, lease string, nonce []byte, gpuUUIDHash string) (*Sampler, error) {
	if key == nil {
		return nil, errors.New("telemetry sampler: no signing key")
	}
	// Validate the fixed fields once, through the same rules the renter
	// applies, so a bad lease or nonce fails here and not on every sample.
	probe := Sample{Lease: lease, GPU: gpuUUIDHash, Seq: 1, Nonce: nonce, Time: 1}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("telemetry sampler: %w", err)
	}
	return &Sampler{key: key, lease: lease, nonce: append([]byte(nil), nonce...), gpu: gpuUUIDHash}, nil
}

// Sign turns one reading of g into the next signed sample and returns it
// with its wire bytes. It refuses a reading of another GPU, and a clock
// that went backwards, rather than sign a sample the renter must reject;
// on any error the chain is left as it was, so the next call can succeed.
// Simulated GPUs sign Simulated samples: they never pass as real.
func (s *Sampler) Sign(g GPU, now time.Time) (*SignedSample, []byte, error) {
	if h := UUIDHash(g.UUID); h != s.gpu {
		return nil, nil, fmt.Errorf("%w: reading is of %s, sampler is for %s", ErrWrongGPU, h, s.gpu)
	}
	used := g.VRAMMiB - g.VRAMFreeMiB
	if used < 0 { // a driver that reports free > total; do not sign a negative
		used = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := now.UnixMilli()
	if ms < s.lastTime {
		return nil, nil, fmt.Errorf("%w: %d ms before the last sample", ErrTimeBackwards, s.lastTime-ms)
	}
	smp := Sample{
		Lease:      s.lease,
		GPU:        s.gpu,
		Seq:        s.seq + 1,
		Prev:       s.prev,
		Nonce:      s.nonce,
		Time:       ms,
		UtilPct:    g.UtilPct,
		MemUsedMiB: used,
		TempC:      g.TempC,
		PowerW:     g.PowerW,
		Simulated:  g.Simulated,
	}
	if err := smp.Validate(); err != nil {
		return nil, nil, err
	}
	body, err := smp.Encode()
	if err != nil {
		return nil, nil, fmt.Errorf("encode sample: %w", err)
	}
	sig, err := s.key.Sign(telemetrySigned(body))
	if err != nil {
		return nil, nil, fmt.Errorf("sign sample: %w", err)
	}
	env := &SignedSample{Body: body, Sig: sig}
	wire, err := env.Marshal()
	if err != nil {
		return nil, nil, fmt.Errorf("encode envelope: %w", err)
	}
	if len(wire) > MaxSampleBytes { // cannot happen within Validate's bounds; kept so we never emit what peers refuse
		return nil, nil, fmt.Errorf("%w: %d bytes", ErrSampleTooLarge, len(wire))
	}
	s.seq, s.prev, s.lastTime = smp.Seq, BodyHash(body), ms
	return env, wire, nil
}

// Seq is the sequence number of the last signed sample (0 before any).
func (s *Sampler) Seq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}
