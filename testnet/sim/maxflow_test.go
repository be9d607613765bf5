package sim

import (
	"math/rand/v2"
	"testing"
)

// The textbook network (CLRS, figure 26.1): its maximum flow is 23.
func TestMaxFlowTextbook(t *testing.T) {
	g := newFlowNet(6)
	for _, e := range [][3]int{{0, 1, 16}, {0, 2, 13}, {2, 1, 4}, {1, 3, 12}, {3, 2, 9}, {2, 4, 14}, {4, 3, 7}, {3, 5, 20}, {4, 5, 4}} {
		g.addEdge(e[0], e[1], int64(e[2]))
	}
	if f := g.maxFlow(0, 5); f != 23 {
		t.Fatalf("max flow %d, want 23", f)
	}
}

// On random small networks the flow equals the minimum cut, found by
// trying every cut (max-flow min-cut theorem).
func TestMaxFlowEqualsMinCut(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for trial := range 200 {
		n := 2 + r.IntN(6)
		type edge struct {
			u, v int
			c    int64
		}
		var es []edge
		g := newFlowNet(n)
		for range r.IntN(4 * n) {
			e := edge{r.IntN(n), r.IntN(n), int64(r.IntN(20))}
			if e.u == e.v {
				continue
			}
			es = append(es, e)
			g.addEdge(e.u, e.v, e.c)
		}
		best := int64(-1)
		for mask := 0; mask < 1<<n; mask++ { // mask: the source side
			if mask&1 == 0 || mask&(1<<(n-1)) != 0 {
				continue
			}
			var cut int64
			for _, e := range es {
				if mask&(1<<e.u) != 0 && mask&(1<<e.v) == 0 {
					cut += e.c
				}
			}
			if best < 0 || cut < best {
				best = cut
			}
		}
		if f := g.maxFlow(0, n-1); f != best {
			t.Fatalf("trial %d: flow %d, min cut %d", trial, f, best)
		}
	}
}
