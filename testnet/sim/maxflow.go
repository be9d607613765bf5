package sim

import "math"

// flowInf is an edge capacity that never binds.
const flowInf = math.MaxInt64 / 4

// flowNet is a directed network for Dinic's maximum flow, with int64
// capacities. Edges live in flat arrays; edge e^1 is e's residual twin.
type flowNet struct {
	head  []int32 // first edge out of each node, -1 if none
	next  []int32 // next edge out of the same node
	to    []int32
	cap   []int64 // residual capacity
	level []int32
	iter  []int32
	queue []int32
}

func newFlowNet(nodes int) *flowNet {
	g := &flowNet{head: make([]int32, nodes)}
	for i := range g.head {
		g.head[i] = -1
	}
	return g
}

// addNode adds a node and returns its index.
func (g *flowNet) addNode() int {
	g.head = append(g.head, -1)
	return len(g.head) - 1
}

func (g *flowNet) nodes() int { return len(g.head) }
func (g *flowNet) edges() int { return len(g.to) / 2 }

// addEdge adds u->v with capacity c (and its zero-capacity twin).
func (g *flowNet) addEdge(u, v int, c int64) {
	for _, e := range [2]struct {
		from, to int
		c        int64
	}{{u, v, c}, {v, u, 0}} {
		g.to = append(g.to, int32(e.to))
		g.cap = append(g.cap, e.c)
		g.next = append(g.next, g.head[e.from])
		g.head[e.from] = int32(len(g.to) - 1)
	}
}

// maxFlow pushes as much as it can from s to t and returns the amount.
func (g *flowNet) maxFlow(s, t int) int64 {
	n := g.nodes()
	g.level = make([]int32, n)
	g.iter = make([]int32, n)
	var total int64
	for g.bfs(s, t) {
		copy(g.iter, g.head)
		total += g.dfs(s, t, flowInf)
	}
	return total
}

// bfs levels the residual graph from s; false once t is unreachable.
func (g *flowNet) bfs(s, t int) bool {
	for i := range g.level {
		g.level[i] = -1
	}
	g.level[s] = 0
	g.queue = append(g.queue[:0], int32(s))
	for i := 0; i < len(g.queue); i++ {
		u := g.queue[i]
		for e := g.head[u]; e >= 0; e = g.next[e] {
			if v := g.to[e]; g.cap[e] > 0 && g.level[v] < 0 {
				g.level[v] = g.level[u] + 1
				g.queue = append(g.queue, v)
			}
		}
	}
	return g.level[t] >= 0
}

// dfs pushes up to limit from u to t along increasing levels and
// returns what it pushed, advancing each node's edge iterator past edges
// that are saturated or lead nowhere (a blocking flow, level by level).
// Paths are at most a few hundred nodes long here, so recursion is fine.
func (g *flowNet) dfs(u, t int, limit int64) int64 {
	if u == t {
		return limit
	}
	var pushed int64
	for ; g.iter[u] >= 0; g.iter[u] = g.next[g.iter[u]] {
		e := g.iter[u]
		v := int(g.to[e])
		if g.cap[e] <= 0 || g.level[v] != g.level[u]+1 {
			continue
		}
		if f := g.dfs(v, t, min(limit-pushed, g.cap[e])); f > 0 {
			g.cap[e] -= f
			g.cap[e^1] += f
			pushed += f
			if pushed == limit {
				return pushed // e may have room left: keep the iterator on it
			}
		}
	}
	return pushed
}
