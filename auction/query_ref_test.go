package auction

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
)

// The property test checks Book.Query against an independent model of the
// query language: clauses are generated as structured values, rendered to
// text, and each is judged by refHolds below, which works on the Offer
// itself (loops over GPUs and windows, exact integer units), not on the
// facts and checkers the implementation uses.

type refClause struct {
	field, op string
	vals      []string // as written
	nums      []int64  // numeric value of each, in the reference's units
}

func (c refClause) String() string {
	if c.op == "in" || c.op == "notin" {
		return c.field + " " + c.op + " [" + strings.Join(c.vals, ",") + "]"
	}
	return c.field + c.op + c.vals[0]
}

func randCase(r *rand.Rand, s string) string {
	if r.Intn(2) == 0 {
		return strings.ToLower(s)
	}
	return s
}

// genClause draws a valid clause: value and its reference number together.
func genClause(r *rand.Rand, providers []string) refClause {
	f := fields[r.Intn(len(fields))]
	c := refClause{field: f.Name, op: f.Ops[r.Intn(len(f.Ops))]}
	n := 1
	if c.op == "in" || c.op == "notin" {
		n = 1 + r.Intn(3)
	}
	for i := 0; i < n; i++ {
		var v string
		var x int64
		switch f.Name {
		case "gpu":
			v = randCase(r, append([]string{"T4"}, modelNames()...)[r.Intn(len(testModels)+1)])
		case "gpus", "cpus":
			x = int64(r.Intn(40))
			v = fmt.Sprint(x)
		case "vram", "memory":
			k := int64(r.Intn(400))
			v, x = fmt.Sprintf("%d.%d", k/2, 5*(k%2)), k*500_000_000 // bytes
		case "cc":
			v = []string{"7.0", "8.0", "8.6", "8.9", "9", "12.0", "8.65"}[r.Intn(7)]
			x = int64(math.Round(mustFloat(v) * 1e6))
		case "price.gold", "price.silver", "price.bronze", "floor.gold", "floor.silver", "floor.bronze":
			k := int64(r.Intn(90))
			v, x = fmt.Sprintf("%d.%02d", k*5/100, k*5%100), k*50_000
		case "available", "max_duration", "free":
			k := int64(r.Intn(60))
			v, x = fmt.Sprintf("%dm", k*30), k*1800
			if r.Intn(4) == 0 {
				v, x = fmt.Sprintf("%dd", k/20), k/20*86400
			}
		case "simulated":
			v = []string{"true", "false"}[r.Intn(2)]
		case "region":
			v = randCase(r, strings.ToUpper(Continents[r.Intn(len(Continents))]))
		case "country":
			v = randCase(r, append([]string{"GB"}, "DE", "US", "JP", "FR", "BR")[r.Intn(6)])
		case "workload":
			v = Workloads[r.Intn(2)]
		case "provider":
			v = providers[r.Intn(len(providers))]
		case "dataset":
			v = append([]string{cid.NewCidV1(cid.DagProtobuf, cid.MustParse(testDatasets[1]).Hash()).String()}, testDatasets...)[r.Intn(4)]
		}
		c.vals, c.nums = append(c.vals, v), append(c.nums, x)
	}
	return c
}

func modelNames() []string {
	var out []string
	for _, m := range testModels {
		out = append(out, m.model)
	}
	return out
}

func mustFloat(s string) float64 {
	var f float64
	fmt.Sscan(s, &f)
	return f
}

// refValue is the reference meaning of a numeric field.
func refValue(o *Offer, q []refClause, field string, now int64) (int64, bool) {
	var sel []GPU
	for _, g := range o.GPUs {
		ok := true
		for _, c := range q {
			if c.field == "gpu" {
				in := false
				for _, v := range c.vals {
					in = in || strings.EqualFold(v, g.Model)
				}
				ok = ok && in == (c.op == "=" || c.op == "in")
			}
		}
		if ok {
			sel = append(sel, g)
		}
	}
	lowest := func(get func(GPU) int64) (int64, bool) {
		m := int64(math.MaxInt64)
		for _, g := range sel {
			m = min(m, get(g))
		}
		return m, len(sel) > 0
	}
	switch field {
	case "gpus":
		return int64(len(sel)), true
	case "vram":
		return lowest(func(g GPU) int64 { return int64(g.VRAMMiB) * 1048576 })
	case "cc":
		return lowest(func(g GPU) int64 { return int64(math.Round(mustFloat(g.ComputeCap) * 1e6)) })
	case "cpus":
		return int64(o.Host.CPUs), true
	case "memory":
		return int64(o.Host.MemoryMiB) * 1048576, true
	case "price.gold", "price.silver", "price.bronze": // in effect now: periods and surge
		pe := o.PriceIn(Tier(strings.TrimPrefix(field, "price.")), time.Unix(now, 0), 0)
		return int64(pe.Price), pe.Base > 0
	case "floor.gold":
		return int64(o.Prices.Gold), o.Prices.Gold > 0
	case "floor.silver":
		return int64(o.Prices.Silver), o.Prices.Silver > 0
	case "floor.bronze":
		return int64(o.Prices.Bronze), o.Prices.Bronze > 0
	case "max_duration":
		if o.Policy.MaxDurationSec == 0 {
			return math.MaxInt64, true
		}
		return o.Policy.MaxDurationSec, true
	case "available":
		end := int64(-1)
		for _, w := range o.Windows { // linear: windows are sorted, touching ones continue
			if w.Start <= now && now < w.End || end >= 0 && w.Start == end {
				end = w.End
			}
		}
		return max(end-now, 0), true
	case "free":
		return refFree(o, now), true
	}
	panic(field)
}

// refFree is the `free` field's meaning, without freewindow.go's walk:
// between consecutive edges (of any window or booking) nothing changes,
// so it tests each such piece at its start, summing every booking that
// covers it, and measures the first run of pieces with a GPU free.
func refFree(o *Offer, now int64) int64 {
	edges := []int64{now}
	for _, w := range o.Windows {
		edges = append(edges, w.Start, w.End)
	}
	for _, b := range o.Booked {
		edges = append(edges, b.Start, b.End)
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i] < edges[j] })
	freeAt := func(t int64) bool {
		in, booked := false, 0
		for _, w := range o.Windows {
			in = in || w.Start <= t && t < w.End
		}
		for _, b := range o.Booked {
			if b.Start <= t && t < b.End {
				booked += b.GPUs
			}
		}
		return in && len(o.GPUs)-booked >= 1
	}
	start := int64(-1)
	for _, t := range edges {
		if t < now {
			continue
		}
		switch free := freeAt(t); {
		case free && start < 0:
			start = t
		case !free && start >= 0:
			return t - start
		}
	}
	return 0
}

func refHolds(o *Offer, q []refClause, c refClause, now int64) bool {
	pos := c.op == "=" || c.op == "in"
	member := func(has func(v string) bool) bool {
		hit := false
		for _, v := range c.vals {
			hit = hit || has(v)
		}
		return hit == pos
	}
	switch c.field {
	case "gpu":
		for _, g := range o.GPUs {
			if member(func(v string) bool { return strings.EqualFold(v, g.Model) }) {
				return true
			}
		}
		return false
	case "region":
		return member(func(v string) bool { return strings.EqualFold(v, o.Region.Continent) })
	case "country":
		return member(func(v string) bool { return strings.EqualFold(v, o.Region.Country) })
	case "provider":
		return member(func(v string) bool { return v == o.Provider })
	case "workload":
		return member(func(v string) bool { return contains(o.Policy.Workloads, v) })
	case "dataset":
		return member(func(v string) bool {
			for _, d := range o.Datasets {
				a, b := cid.MustParse(v), cid.MustParse(d)
				if a.Type() == b.Type() && bytes.Equal(a.Hash(), b.Hash()) {
					return true
				}
			}
			return false
		})
	case "simulated":
		sim := false
		for _, g := range o.GPUs {
			sim = sim || g.Simulated
		}
		return (fmt.Sprint(sim) == c.vals[0]) == pos
	}
	x, ok := refValue(o, q, c.field, now)
	if !ok {
		return false
	}
	switch c.op {
	case "<":
		return x < c.nums[0]
	case "<=":
		return x <= c.nums[0]
	case ">":
		return x > c.nums[0]
	case ">=":
		return x >= c.nums[0]
	case "!=":
		return x != c.nums[0]
	}
	in := false
	for _, v := range c.nums {
		in = in || v == x
	}
	return in == pos
}
