package doctor

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The clock survey behind node_doctor: which peers to ask, and asking them.

// MaxClockPeers bounds the clock survey: a skew shows up in a handful of
// peers as well as in all, and doctor must answer in well under 3 s.
// doctorParallel bounds the requests in flight, doctorClockWait the whole
// survey.
const (
	MaxClockPeers   = 16
	doctorParallel  = 8
	doctorClockWait = 2 * time.Second
)

// SurveyClocks asks at most MaxClockPeers of ps for their time and fills
// r's Clocks and skew figures.
func SurveyClocks(ctx context.Context, h ClockAsker, r *Result, ps []p2p.PeerInfo) {
	r.Clocks = askClocks(ctx, h, PickClockPeers(ps, MaxClockPeers, rand.Shuffle))
	r.MedianSkewMS, r.MaxSkewMS = SkewStats(r.Clocks)
}

// ClockAsker is what the survey needs of the host (*p2p.Host).
type ClockAsker interface {
	Clock(ctx context.Context, p peer.ID) (p2p.ClockSample, error)
}

// PickClockPeers chooses at most n of ps to ask for their time: those this
// node dialled first, since whoever dials us chooses to, and many
// identities dialling in could fill a sample taken in order; at random
// within each group, so no fixed set of peers is always the one asked.
// shuffle is rand.Shuffle (a seeded one in tests).
func PickClockPeers(ps []p2p.PeerInfo, n int, shuffle func(int, func(i, j int))) []peer.ID {
	var out, in []peer.ID
	for _, p := range ps {
		if p.Direction == "outbound" {
			out = append(out, p.ID)
		} else {
			in = append(in, p.ID)
		}
	}
	for _, ids := range [][]peer.ID{out, in} {
		shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	ids := append(out, in...)
	return ids[:min(n, len(ids))]
}

// askClocks asks ids for their time, at most doctorParallel at once,
// all within doctorClockWait.
func askClocks(ctx context.Context, h ClockAsker, ids []peer.ID) []PeerClock {
	ctx, cancel := context.WithTimeout(ctx, doctorClockWait)
	defer cancel()
	out := make([]PeerClock, len(ids))
	sem := make(chan struct{}, doctorParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pc := PeerClock{PeerID: id.String()}
			s, err := h.Clock(ctx, id)
			if err != nil {
				pc.Error = err.Error()
			} else {
				pc.SkewMS, pc.RTTMS = millis(s.Skew), millis(s.RTT)
			}
			out[i] = pc
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].PeerID < out[j].PeerID })
	return out
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
