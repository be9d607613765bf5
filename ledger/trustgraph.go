package ledger

import "math"

// graph holds peers as dense indexes (self is 0) and aggregated rating
// evidence per (rater, subject) edge, so that EigenTrust iterates over
// flat slices rather than maps: 10,000 peers and 100,000 ratings must
// score well under a second on a shared laptop.
type graph struct {
	index  map[string]int32
	names  []string
	edgeOf map[uint64]int
	from   []int32
	to     []int32
	ev     [][2]float64 // positive, negative evidence
	direct [][2]float64 // self's own evidence about each peer
}

func newGraph(self string) *graph {
	g := &graph{index: map[string]int32{}, edgeOf: map[uint64]int{}}
	g.id(self)
	return g
}

func (g *graph) id(name string) int32 {
	if i, ok := g.index[name]; ok {
		return i
	}
	i := int32(len(g.names))
	g.index[name] = i
	g.names = append(g.names, name)
	g.direct = append(g.direct, [2]float64{})
	return i
}

func (g *graph) add(i, j int32, pos, neg float64) {
	if i == 0 {
		g.direct[j][0] += pos
		g.direct[j][1] += neg
	}
	k := uint64(i)<<32 | uint64(j)
	e, ok := g.edgeOf[k]
	if !ok {
		e = len(g.from)
		g.edgeOf[k] = e
		g.from, g.to = append(g.from, i), append(g.to, j)
		g.ev = append(g.ev, [2]float64{})
	}
	g.ev[e][0] += pos
	g.ev[e][1] += neg
}

// eigenTrust iterates t = (1-d)(Cᵀt + dangling·p) + d·p from t = p, where
// C holds each rater's local trust max(pos-neg, 0) normalised to sum 1.
// Raters with no positive local trust hand their mass back to p (the
// standard fix for dangling rows), so trust never flows anywhere self's
// pre-trusted set does not lead.
func (g *graph) eigenTrust(p []float64) []float64 {
	n := len(g.names)
	w := make([]float64, len(g.from))
	rowSum := make([]float64, n)
	for e := range g.from {
		w[e] = max(g.ev[e][0]-g.ev[e][1], 0)
		rowSum[g.from[e]] += w[e]
	}
	for e := range w {
		if s := rowSum[g.from[e]]; s > 0 {
			w[e] /= s
		}
	}
	t := append([]float64(nil), p...)
	next := make([]float64, n)
	for it := 0; it < maxIterations; it++ {
		var dangling float64
		for i, s := range rowSum {
			if s == 0 {
				dangling += t[i]
			}
		}
		clear(next)
		for e, we := range w {
			if we > 0 {
				next[g.to[e]] += t[g.from[e]] * we
			}
		}
		var diff float64
		for j := range next {
			next[j] = (1-Damping)*(next[j]+dangling*p[j]) + Damping*p[j]
			diff += math.Abs(next[j] - t[j])
		}
		t, next = next, t
		if diff < convergedL1 {
			break
		}
	}
	return t
}
