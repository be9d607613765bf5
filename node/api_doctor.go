package node

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// DoctorResult is node_doctor's result: what only the running node knows.
type DoctorResult struct {
	Network string `json:"network"`
	// ListenAddrs are the addresses the host listens on, as configured
	// (0.0.0.0 unexpanded); Addrs what it advertises to peers.
	ListenAddrs  []string `json:"listen_addrs"`
	Addrs        []string `json:"addrs"`
	Reachability string   `json:"reachability"` // AutoNAT's answer: unknown, public or private
	Peers        int      `json:"peers"`
	// Clocks are the peers asked for their time: at most doctorMaxPeers,
	// chosen at random, those this node dialled itself first.
	Clocks []PeerClock `json:"clocks"`
	// MedianSkewMS is the median skew of the peers that answered: what the
	// clock check judges this host's clock by, since one wrong (or lying)
	// peer cannot move it. MaxSkewMS is the largest |skew|, which one can.
	MedianSkewMS float64 `json:"median_skew_ms"`
	MaxSkewMS    float64 `json:"max_skew_ms"`
}

// PeerClock is one peer's clock against this node's: skew_ms is the
// peer's time minus ours, good to within rtt_ms/2.
type PeerClock struct {
	PeerID string  `json:"peer_id"`
	SkewMS float64 `json:"skew_ms"`
	RTTMS  float64 `json:"rtt_ms"`
	Error  string  `json:"error,omitempty"`
}

// doctorMaxPeers bounds the clock survey: a skew shows up in a handful of
// peers as well as in all, and doctor must answer in well under 3 s.
// doctorParallel bounds the requests in flight, doctorClockWait the whole
// survey.
const (
	doctorMaxPeers  = 16
	doctorParallel  = 8
	doctorClockWait = 2 * time.Second
)

type doctorAPI struct{ n *Node }

// registerDoctorAPI adds node_doctor. The clock protocol it asks peers is
// served by every node from the start (startHost), RPC or not.
func registerDoctorAPI(s *rpc.Server, n *Node) {
	a := doctorAPI{n}
	rpc.Register(s, "node_doctor", rpc.MethodDoc{
		Summary:     "What `gleaner doctor` needs of the running node: listen addresses, AutoNAT reachability and connected peers' clock skew.",
		Description: "Asks up to 16 connected peers, chosen at random and those this node dialled first, for their time (/gleaner/N/clock/1) in parallel; answers within about 2 s. median_skew_ms is the median over the peers that answered.",
	}, a.Doctor)
}

func (a doctorAPI) Doctor(ctx context.Context, _ struct{}) (DoctorResult, error) {
	h := a.n.host
	r := DoctorResult{
		Network:      h.Network(),
		ListenAddrs:  addrStrings(h.LibP2P().Network().ListenAddresses()),
		Addrs:        addrStrings(h.Addrs()),
		Reachability: h.Reachability(),
	}
	ps := h.Peers()
	r.Peers = len(ps)
	r.Clocks = surveyClocks(ctx, h, pickClockPeers(ps, doctorMaxPeers, rand.Shuffle))
	r.MedianSkewMS, r.MaxSkewMS = skewStats(r.Clocks)
	return r, nil
}

// clockAsker is what the survey needs of the host (*p2p.Host).
type clockAsker interface {
	Clock(ctx context.Context, p peer.ID) (p2p.ClockSample, error)
}

// pickClockPeers chooses at most n of ps to ask for their time: those this
// node dialled first, since whoever dials us chooses to, and many
// identities dialling in could fill a sample taken in order; at random
// within each group, so no fixed set of peers is always the one asked.
// shuffle is rand.Shuffle (a seeded one in tests).
func pickClockPeers(ps []p2p.PeerInfo, n int, shuffle func(int, func(i, j int))) []peer.ID {
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

// skewStats is the median skew of the peers that answered, and the
// largest |skew| among them; 0, 0 when none did.
func skewStats(cs []PeerClock) (median, maxAbs float64) {
	var s []float64
	for _, c := range cs {
		if c.Error == "" {
			s = append(s, c.SkewMS)
			maxAbs = max(maxAbs, abs(c.SkewMS))
		}
	}
	if len(s) == 0 {
		return 0, 0
	}
	sort.Float64s(s)
	if m := len(s) / 2; len(s)%2 == 1 {
		median = s[m]
	} else {
		median = (s[m-1] + s[m]) / 2
	}
	return median, maxAbs
}

// surveyClocks asks ids for their time, at most doctorParallel at once,
// all within doctorClockWait.
func surveyClocks(ctx context.Context, h clockAsker, ids []peer.ID) []PeerClock {
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
				pc.SkewMS, pc.RTTMS = ms(s.Skew), ms(s.RTT)
			}
			out[i] = pc
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].PeerID < out[j].PeerID })
	return out
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
