package sim

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
)

// Bound is an upper bound on the useful GPU-seconds any schedule of a run
// could fill, and the size of the flow network that gave it.
type Bound struct {
	GPUSeconds int64
	Slot       int64 // seconds per time slot
	Classes    int   // provider classes: (model, continent, country)
	Nodes      int
	Edges      int
}

// UpperBound relaxes the scheduling problem to a maximum flow that no
// schedule (central, clairvoyant or the market) can beat on useful
// GPU-seconds. Time is cut into slots of slot seconds up to horizon.
// Providers fall into classes by (model, continent, country); a class
// offers, in each slot, the GPU-seconds its providers' windows hold
// there. Jobs are pooled by the set of classes they may use (a class
// counts if any provider in it serves the job: model, region, GPUs,
// floor within MaxPrice) into one waiting chain per set: a job's work,
// capped by what is left to the horizon, enters the chain at its submit
// slot, where at most the part of the slot after Submit may be used,
// and the rest enters at the next slot; the chain only runs forward, so
// work never runs before its submission. Contiguity, tiers, preemption
// and the per-job GPU count within a class are relaxed, so every
// schedule's useful work is a feasible flow and the bound holds.
func UpperBound(s *Supply, d *Demand, horizon, slot int64) Bound {
	if slot <= 0 {
		slot = 3600
	}
	b := Bound{Slot: slot}
	if horizon <= 0 {
		return b
	}
	slots := int((horizon + slot - 1) / slot)
	cl := newUBClasses(s, horizon, slot, slots)
	b.Classes = len(cl.keys)

	// Demand per class set and slot of entry.
	sets := map[string][]int64{}
	members := map[string][]int{}
	cache := map[string]string{}
	for i := range d.Jobs {
		j := &d.Jobs[i]
		if j.Submit >= horizon || j.Duration <= 0 || j.GPUs <= 0 {
			continue
		}
		sig := ubSignature(j)
		key, ok := cache[sig]
		if !ok {
			key = cl.setKey(j)
			cache[sig] = key
		}
		if key == "" {
			continue
		}
		if sets[key] == nil {
			sets[key] = make([]int64, slots)
			members[key] = cl.setOf(j)
		}
		sub := max(j.Submit, 0)
		g := int64(j.Width()) // a gang's members relaxed to independent work: still a bound
		total := min(j.Duration, horizon-sub) * g
		k := int(sub / slot)
		partial := min(total, (min(int64(k+1)*slot, horizon)-sub)*g)
		sets[key][k] += partial
		if rest := total - partial; rest > 0 {
			sets[key][k+1] += rest // k+1 < slots: the submit slot ends before the horizon
		}
	}

	g := newFlowNet(2)
	src, sink := 0, 1
	cnode := make([]int, len(cl.keys)*slots)
	for c := range cl.keys {
		for t := range slots {
			if v := cl.offer[c][t]; v > 0 {
				cnode[c*slots+t] = g.addNode()
				g.addEdge(cnode[c*slots+t], sink, v)
			}
		}
	}
	for _, key := range ubSortedKeys(sets) {
		supply, set := sets[key], members[key]
		first := slices.IndexFunc(supply, func(v int64) bool { return v > 0 })
		prev := -1
		for t := first; t < slots; t++ {
			w := g.addNode()
			if prev >= 0 {
				g.addEdge(prev, w, flowInf)
			}
			if supply[t] > 0 {
				g.addEdge(src, w, supply[t])
			}
			for _, c := range set {
				if cl.offer[c][t] > 0 {
					g.addEdge(w, cnode[c*slots+t], flowInf)
				}
			}
			prev = w
		}
	}
	b.GPUSeconds = g.maxFlow(src, sink)
	b.Nodes, b.Edges = g.nodes(), g.edges()
	return b
}

// ubClasses are the provider classes of a supply and what they offer.
type ubClasses struct {
	keys  []string  // sorted "model|continent|country"
	model []string  // per class
	cont  []string  // per class
	ctry  []string  // per class
	offer [][]int64 // per class and slot: GPU-seconds of windows
	// minFloor[c][tier][g]: the lowest offered floor of the tier among the
	// class's providers with at least g GPUs; 0 if none offers it.
	minFloor [][3][]auction.Credits
}

func newUBClasses(s *Supply, horizon, slot int64, slots int) *ubClasses {
	idx := map[string]int{}
	for _, p := range s.Providers {
		idx[p.Model+"|"+p.Continent+"|"+p.Country] = 0
	}
	cl := &ubClasses{keys: ubSortedKeys(idx)}
	maxG := 0
	for _, p := range s.Providers {
		maxG = max(maxG, p.GPUs)
	}
	for i, k := range cl.keys {
		idx[k] = i
	}
	cl.model = make([]string, len(cl.keys))
	cl.cont = make([]string, len(cl.keys))
	cl.ctry = make([]string, len(cl.keys))
	cl.offer = make([][]int64, len(cl.keys))
	cl.minFloor = make([][3][]auction.Credits, len(cl.keys))
	for c := range cl.keys {
		cl.offer[c] = make([]int64, slots)
		for t := range 3 {
			cl.minFloor[c][t] = make([]auction.Credits, maxG+1)
		}
	}
	tiers := [3]auction.Tier{auction.Gold, auction.Silver, auction.Bronze}
	for _, p := range s.Providers {
		c := idx[p.Model+"|"+p.Continent+"|"+p.Country]
		cl.model[c], cl.cont[c], cl.ctry[c] = p.Model, p.Continent, p.Country
		for _, w := range p.Windows {
			for t := max(w.Start, 0) / slot; t < int64(slots) && t*slot < w.End; t++ {
				lo, hi := max(w.Start, t*slot), min(w.End, (t+1)*slot, horizon)
				if hi > lo {
					cl.offer[c][t] += (hi - lo) * int64(p.GPUs)
				}
			}
		}
		for ti, tier := range tiers {
			f := TierFloor(p.Floors, tier)
			for g := 1; g <= p.GPUs && f > 0; g++ {
				if m := cl.minFloor[c][ti][g]; m == 0 || f < m {
					cl.minFloor[c][ti][g] = f
				}
			}
		}
	}
	return cl
}

// setOf is the classes with a provider that serves j, in class order:
// a probe with the class's model and region and its lowest floor among
// providers with enough GPUs stands for them all.
func (cl *ubClasses) setOf(j *Job) []int {
	ti, ok := map[auction.Tier]int{auction.Gold: 0, auction.Silver: 1, auction.Bronze: 2}[j.Tier]
	if !ok {
		return nil
	}
	var set []int
	for c := range cl.keys {
		if j.GPUs >= len(cl.minFloor[c][ti]) {
			continue
		}
		f := cl.minFloor[c][ti][j.GPUs]
		probe := Provider{Model: cl.model[c], Continent: cl.cont[c], Country: cl.ctry[c], GPUs: j.GPUs,
			Floors: auction.Prices{Gold: f, Silver: f, Bronze: f}}
		if f > 0 && ProviderServes(&probe, j) {
			set = append(set, c)
		}
	}
	return set
}

// setKey names j's class set; "" if it is empty.
func (cl *ubClasses) setKey(j *Job) string {
	var sb strings.Builder
	for i, c := range cl.setOf(j) {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(c))
	}
	return sb.String()
}

// ubSignature is everything about a job that decides its class set.
func ubSignature(j *Job) string {
	return strings.Join(j.Models, ",") + "|" + j.Region + "|" + string(j.Tier) + "|" +
		strconv.Itoa(j.GPUs) + "|" + strconv.FormatInt(int64(j.MaxPrice), 10)
}

func ubSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
