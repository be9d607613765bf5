package node

import (
	"context"
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
	// Clocks are the peers asked for their time (at most doctorMaxPeers),
	// MaxSkewMS the largest |skew| of those that answered.
	Clocks    []PeerClock `json:"clocks"`
	MaxSkewMS float64     `json:"max_skew_ms"`
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
const (
	doctorMaxPeers  = 16
	doctorParallel  = 8
	doctorClockWait = 2 * time.Second
)

type doctorAPI struct{ n *Node }

// registerDoctorAPI adds node_doctor and starts answering the clock
// protocol that node_doctor asks peers: the two are one feature, and this
// runs once, after the host is built.
func registerDoctorAPI(s *rpc.Server, n *Node) {
	n.host.ServeClock()
	a := doctorAPI{n}
	rpc.Register(s, "node_doctor", rpc.MethodDoc{
		Summary:     "What `gleaner doctor` needs of the running node: listen addresses, AutoNAT reachability and connected peers' clock skew.",
		Description: "Asks up to 16 connected peers for their time (/gleaner/N/clock/1) in parallel; answers within about 2 s.",
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
	ids := make([]peer.ID, 0, len(ps))
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	r.Clocks = surveyClocks(ctx, h, ids)
	for _, c := range r.Clocks {
		if c.Error == "" {
			r.MaxSkewMS = max(r.MaxSkewMS, abs(c.SkewMS))
		}
	}
	return r, nil
}

// surveyClocks asks up to doctorMaxPeers of ids for their time, at most
// doctorParallel at once, all within doctorClockWait.
func surveyClocks(ctx context.Context, h *p2p.Host, ids []peer.ID) []PeerClock {
	if len(ids) > doctorMaxPeers {
		ids = ids[:doctorMaxPeers]
	}
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
