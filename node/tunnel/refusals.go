package tunnel

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// maxRefusalPeers bounds the limiters kept: a stranger with many
// identities costs at most this many small structs.
const maxRefusalPeers = 4096

// Refusals says whether a peer may be answered one more refusal: one per
// every, after a burst. Beyond, the caller resets the stream unanswered,
// which costs no more than the header's read, so a peer that keeps
// knocking cannot make the daemon write for it.
type Refusals struct {
	every time.Duration
	burst int

	mu sync.Mutex // guards m
	m  map[peer.ID]*rate.Limiter
}

// NewRefusals allows each peer burst refusals, then one per every.
func NewRefusals(every time.Duration, burst int) *Refusals {
	return &Refusals{every: every, burst: burst, m: map[peer.ID]*rate.Limiter{}}
}

// Allow takes one refusal from from's allowance.
func (r *Refusals) Allow(from peer.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.m[from]
	if l == nil {
		if len(r.m) >= maxRefusalPeers {
			// Forget the peers whose buckets have refilled: they are
			// where a new one would start anyway.
			for p, pl := range r.m {
				if pl.Tokens() >= float64(r.burst) {
					delete(r.m, p)
				}
			}
			if len(r.m) >= maxRefusalPeers {
				return false
			}
		}
		l = rate.NewLimiter(rate.Every(r.every), r.burst)
		r.m[from] = l
	}
	return l.Allow()
}
