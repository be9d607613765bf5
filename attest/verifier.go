package attest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Verifier is the renter's side of one GPU's telemetry chain for one
// lease. It accepts exactly the provider's samples, for this lease and
// nonce, in order, without gaps or repeats. Safe for concurrent use.
type Verifier struct {
	pub   crypto.PubKey
	lease string
	nonce []byte

	mu       sync.Mutex // guards the chain state below
	gpu      string     // pinned by the first accepted sample
	seq      uint64     // last accepted sequence number
	prev     []byte     // hash of the last accepted body
	lastTime int64      // unix ms of the last accepted sample
}

// NewVerifier expects samples signed by provider for lease, echoing nonce.
// It fails for identities whose key is not inlined in the peer ID (RSA):
// those could never sign a sample we can check without a key lookup.
func NewVerifier(provider peer.ID, lease string, nonce []byte) (*Verifier, error) {
	pub, err := provider.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("telemetry verifier: no public key in %s: %w", provider, err)
	}
	if lease == "" || len(nonce) < minNonceLen || len(nonce) > maxNonceLen {
		return nil, errors.New("telemetry verifier: empty lease or nonce length out of bounds")
	}
	return &Verifier{pub: pub, lease: lease, nonce: append([]byte(nil), nonce...)}, nil
}

// Accept checks raw completely and, only if it passes, advances the chain.
// Order: encoding and schema, then the signature, so every later error
// (wrong lease, replay, gap, time) is about a sample the provider really
// signed, which makes it evidence rather than noise.
func (v *Verifier) Accept(raw []byte, now time.Time) (*Sample, error) {
	s, env, err := DecodeSignedSample(raw)
	if err != nil {
		return nil, err
	}
	if ok, err := v.pub.Verify(telemetrySigned(env.Body), env.Sig); err != nil || !ok {
		return nil, fmt.Errorf("%w: does not verify for the provider", ErrSampleSig)
	}
	if s.Lease != v.lease {
		return nil, fmt.Errorf("%w: %q, want %q", ErrWrongLease, s.Lease, v.lease)
	}
	if !bytes.Equal(s.Nonce, v.nonce) {
		return nil, ErrWrongNonce
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gpu != "" && s.GPU != v.gpu {
		return nil, fmt.Errorf("%w: %s, chain is for %s", ErrWrongGPU, s.GPU, v.gpu)
	}
	switch {
	case s.Seq <= v.seq:
		return nil, fmt.Errorf("%w: seq %d, last accepted %d", ErrReplayedSample, s.Seq, v.seq)
	case s.Seq != v.seq+1:
		return nil, fmt.Errorf("%w: seq %d, want %d", ErrSampleGap, s.Seq, v.seq+1)
	case !bytes.Equal(s.Prev, v.prev):
		// Seq 1 is covered too: Validate insists on an empty Prev there and
		// v.prev is nil until the first sample.
		return nil, fmt.Errorf("%w: seq %d", ErrBrokenChain, s.Seq)
	case s.Time < v.lastTime:
		return nil, fmt.Errorf("%w: %d ms before seq %d", ErrTimeBackwards, v.lastTime-s.Time, v.seq)
	case s.Time > now.Add(MaxSampleSkew).UnixMilli():
		return nil, fmt.Errorf("%w: %d ms ahead of now", ErrSampleFuture, s.Time-now.UnixMilli())
	}
	v.gpu, v.seq, v.prev, v.lastTime = s.GPU, s.Seq, BodyHash(env.Body), s.Time
	return s, nil
}

// Head is the last accepted sequence number and body hash: what a digest
// or a dispute cites.
func (v *Verifier) Head() (uint64, []byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seq, append([]byte(nil), v.prev...)
}
