package doctor

import "sort"

// Result is node_doctor's result: what only the running node knows.
type Result struct {
	Network string `json:"network"`
	// ListenAddrs are the addresses the host listens on, as configured
	// (0.0.0.0 unexpanded); Addrs what it advertises to peers.
	ListenAddrs []string `json:"listen_addrs"`
	Addrs       []string `json:"addrs"`
	// Reachability is the host's verdict (p2p.Host.Reachability): unknown,
	// public, private, nat-holepunch or relayed.
	Reachability string `json:"reachability"`
	Peers        int    `json:"peers"`
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

// SkewStats is the median skew of the peers that answered, and the
// largest |skew| among them; 0, 0 when none did.
func SkewStats(cs []PeerClock) (median, maxAbs float64) {
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

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
