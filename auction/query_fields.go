package auction

import (
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// FieldDoc describes one query field, for help text and error messages.
type FieldDoc struct {
	Name      string   // as written in a query
	Type      string   // integer, decimal, duration, bool, string, string set
	Unit      string   // what the number or string means
	Ops       []string // operators the field accepts
	Orderable bool     // usable as a Book.Query order
	Help      string
}

type valueKind int

const (
	kindCount    valueKind = iota // integer
	kindDecimal                   // non-negative decimal, up to 6 fractional digits
	kindDuration                  // Go duration or whole days ("2d"), second resolution
	kindBool
	kindString // the offer has one value
	kindSet    // the offer holds a set; clauses test membership
	kindGPU    // selects the offer's GPUs by model; see query.go
)

var (
	orderedOps = []string{"=", "!=", "<", "<=", ">", ">=", "in", "notin"}
	boolOps    = []string{"=", "!="}
	stringOps  = []string{"=", "!=", "in", "notin"}
)

// fieldDef is a FieldDoc plus how to parse its values and read its fact.
type fieldDef struct {
	FieldDoc
	kind  valueKind
	scale int64                                           // decimals: fact units per millionth of the query unit
	norm  func(string) (string, error)                    // string kinds: validate and normalise a value
	num   func(f *facts, s *gpuSel, w when) (int64, bool) // ordered kinds; false = absent, no clause matches
	str   func(f *facts) string                           // kindString
	has   func(f *facts, v string) bool                   // kindSet
	flag  func(f *facts) bool                             // kindBool
	sel   bool                                            // reads the GPU selection (gpus, vram, cc)
	// low, where set, is a cheap lower bound on num: a clause that
	// wants less than it fails without computing num (price.TIER's
	// base floor, which periods and surge only raise).
	low func(f *facts) int64
}

func selecting(f *fieldDef) *fieldDef { f.sel = true; return f }

func count(name, unit, help string, num func(*facts, *gpuSel, when) (int64, bool)) *fieldDef {
	return &fieldDef{FieldDoc: FieldDoc{name, "integer", unit, orderedOps, true, help}, kind: kindCount, num: num}
}

func decimal(name, unit, help string, scale int64, num func(*facts, *gpuSel, when) (int64, bool)) *fieldDef {
	return &fieldDef{FieldDoc: FieldDoc{name, "decimal", unit, orderedOps, true, help}, kind: kindDecimal, scale: scale, num: num}
}

func duration(name, help string, num func(*facts, *gpuSel, when) (int64, bool)) *fieldDef {
	return &fieldDef{FieldDoc: FieldDoc{name, "duration", "duration such as 90m, 4h, 2d or 1d12h", orderedOps, true, help}, kind: kindDuration, num: num}
}

// price is the price.TIER field: the price in effect over the query's
// window (now, unless market offers names a job's window), with the
// owner's price periods and the surge the offer's bookings imply
// (Offer.PriceIn), so that a clause never admits an offer whose floor in
// force is above the bound: price.silver<=1 keeps no offer that refuses
// a job of max_price 1.
func price(tier int, name string) *fieldDef {
	d := decimal("price."+name, "credits per GPU-hour",
		"the "+name+" price in effect now (or over --start/--for): the floor raised by any price period in force, with the surge its bookings imply; offers without a "+name+" tier never match",
		1, func(f *facts, _ *gpuSel, w when) (int64, bool) { return f.priceIn(tier, w), f.prices[tier] > 0 })
	d.low = func(f *facts) int64 { return f.prices[tier] }
	return d
}

// floor is the floor.TIER field: the owner's base floor, at any hour.
func floor(tier int, name string) *fieldDef {
	return decimal("floor."+name, "credits per GPU-hour",
		"the offer's base "+name+" floor, before price periods and surge",
		1, func(f *facts, _ *gpuSel, _ when) (int64, bool) { return f.prices[tier], f.prices[tier] > 0 })
}

// when is the clock a query runs at: now, and the job window that
// prices are read over, [start, start+secs) (secs 0: the instant start).
// memo remembers, for one run, whether a weekly rule in a zone meets the
// window: offers share a handful of peak rules, and deciding one takes
// calendar arithmetic.
type when struct {
	now, start, secs int64
	memo             map[periodKey]bool
}

type periodKey struct {
	loc  *time.Location
	rule weeklyRule
}

// priceIn is Offer.PriceIn's Price from the facts: the floor in force
// over w's window (Pricing.floorFor, with compiled rules and w's memo),
// surged by the bookings at its start.
func (f *facts) priceIn(tier int, w when) int64 {
	base := Credits(f.prices[tier])
	if base <= 0 || f.rules == nil && (!f.surges || len(f.booked) == 0) {
		return int64(base) // no period, and idle or no surge: the base floor
	}
	fl := base
	if f.rules != nil && base <= maxPrice {
		secs := min(max(w.secs, 1), 8*24*3600) // as floorFor
		for i := range f.pricing.Periods {
			c := f.rules[i]
			p := f.pricing.Periods[i].floor(base, tier)
			if p <= fl || !c.ok {
				continue
			}
			k := periodKey{f.loc, c.rule}
			in, seen := w.memo[k]
			if !seen {
				in = c.rule.overlaps(time.Unix(w.start, 0).In(f.loc), time.Unix(w.start+secs, 0).In(f.loc), f.loc)
				if w.memo != nil {
					w.memo[k] = in
				}
			}
			if in {
				fl = p
			}
		}
	}
	p, _ := surgeAt(f.pricing, fl, f.booked, int(f.all.count), w.start)
	return int64(p)
}

// gbBytes converts millionths of a GB (10^9 bytes: the unit cards are sold
// in, so vram>=80 matches an 80 GB H100 whose driver reports 81559 MiB)
// into bytes, the unit facts hold.
const gbBytes = 1000

// fields is the query language's vocabulary, in help-text order.
var fields = []*fieldDef{
	{FieldDoc: FieldDoc{"gpu", "string", "canonical model, case-insensitive (H100, A100-80GB, RTX4090)", stringOps, false,
		"selects the offer's GPUs by model; fails if it selects none. gpus, vram and cc then see only GPUs every gpu clause selects"},
		kind: kindGPU, norm: func(v string) (string, error) {
			if err := checkModel(v); err != nil {
				return "", err
			}
			return strings.ToLower(v), nil
		}},
	selecting(count("gpus", "GPUs", "number of selected GPUs", func(_ *facts, s *gpuSel, _ when) (int64, bool) { return s.count, true })),
	selecting(decimal("vram", "GB (10^9 bytes) per GPU", "the smallest memory among the selected GPUs", gbBytes,
		func(_ *facts, s *gpuSel, _ when) (int64, bool) { return s.vram, s.count > 0 })),
	selecting(decimal("cc", "CUDA compute capability, e.g. 8.9", "the lowest compute capability among the selected GPUs", 1,
		func(_ *facts, s *gpuSel, _ when) (int64, bool) { return s.cc, s.count > 0 })),
	{FieldDoc: FieldDoc{"region", "string", "continent code: " + strings.Join(Continents, " "), stringOps, false, "where the provider is"},
		kind: kindString, str: func(f *facts) string { return f.continent }, norm: func(v string) (string, error) {
			if _, c, ok := strings.Cut(v, "/"); ok {
				return "", fmt.Errorf("%q: region is a continent; for a country write country=%s", v, strings.ToUpper(c))
			}
			if err := checkContinent(v); err != nil {
				return "", err
			}
			return canonicalContinent(strings.ToLower(v)), nil
		}},
	{FieldDoc: FieldDoc{"country", "string", "ISO 3166-1 alpha-2, case-insensitive (DE, US)", stringOps, false, "where the provider is"},
		kind: kindString, str: func(f *facts) string { return f.country }, norm: func(v string) (string, error) {
			if err := checkCountry(v); err != nil {
				return "", err
			}
			return strings.ToUpper(v), nil
		}},
	price(0, "gold"),
	price(1, "silver"),
	price(2, "bronze"),
	floor(0, "gold"),
	floor(1, "silver"),
	floor(2, "bronze"),
	duration("available", "contiguous availability from now (offers without a window containing now have 0)",
		func(f *facts, _ *gpuSel, w when) (int64, bool) { return availableSecs(f.windows, w.now), true }),
	duration("free", "length of the next free window: the first stretch from now on in which at least one GPU is inside the windows and not booked (0 if none)",
		func(f *facts, _ *gpuSel, w when) (int64, bool) { return freeSecs(f, w.now), true }),
	{FieldDoc: FieldDoc{"simulated", "bool", "true or false", boolOps, false, "true if any of the offer's GPUs is simulated"},
		kind: kindBool, flag: func(f *facts) bool { return f.simulated }},
	{FieldDoc: FieldDoc{"workload", "string set", strings.Join(Workloads, " or "), stringOps, false,
		"= and in: the policy allows it (any of them); != and notin: it allows none of them"},
		kind: kindSet, has: hasWorkload, norm: func(v string) (string, error) {
			if v = strings.ToLower(v); !contains(Workloads, v) {
				return "", fmt.Errorf("%q is not a workload (%s)", v, strings.Join(Workloads, ", "))
			}
			return v, nil
		}},
	{FieldDoc: FieldDoc{"provider", "string", "peer ID", stringOps, false, "the provider's identity"},
		kind: kindString, str: func(f *facts) string { return f.provider }, norm: func(v string) (string, error) {
			id, err := peer.Decode(v)
			if err != nil {
				return "", fmt.Errorf("%q is not a peer ID", v)
			}
			return id.String(), nil
		}},
	count("cpus", "CPU cores", "host CPUs", func(f *facts, _ *gpuSel, _ when) (int64, bool) { return f.cpus, true }),
	decimal("memory", "GB (10^9 bytes)", "host memory", gbBytes,
		func(f *facts, _ *gpuSel, _ when) (int64, bool) { return f.memory, true }),
	{FieldDoc: FieldDoc{"dataset", "string set", "CID", stringOps, false,
		"= and in: the provider caches it (any of them); != and notin: it caches none of them"},
		kind: kindSet, has: hasDataset, norm: func(v string) (string, error) {
			k, err := datasetKey(v)
			if err != nil {
				return "", fmt.Errorf("%q is not a CID", v)
			}
			return k, nil
		}},
	duration("max_duration", "the longest job the policy allows; no limit counts as infinitely long",
		func(f *facts, _ *gpuSel, _ when) (int64, bool) { return f.maxDur, true }),
}

// freeSecs is the `free` field: any one GPU, because bookings count GPUs
// without naming them, so a query cannot tell which of a gpu clause's
// selection are free; matching checks the job's own count.
func freeSecs(f *facts, now int64) int64 {
	w, ok := nextFree(f.windows, f.booked, int(f.all.count), 1, now)
	if !ok {
		return 0
	}
	return w.End - w.Start
}

func hasWorkload(f *facts, v string) bool {
	for i, w := range Workloads {
		if w == v {
			return f.workloads&(1<<uint(i)) != 0
		}
	}
	return false
}

func hasDataset(f *facts, v string) bool { return contains(f.datasets, v) }

var fieldByName = func() map[string]*fieldDef {
	m := make(map[string]*fieldDef, len(fields))
	for _, f := range fields {
		m[f.Name] = f
	}
	return m
}()

// QueryFields documents every field the query language knows, in a stable
// order, for help text.
func QueryFields() []FieldDoc {
	out := make([]FieldDoc, len(fields))
	for i, f := range fields {
		out[i] = f.FieldDoc
		out[i].Ops = append([]string(nil), f.Ops...)
	}
	return out
}

func fieldNames(orderableOnly bool) string {
	var names []string
	for _, f := range fields {
		if !orderableOnly || f.Orderable {
			names = append(names, f.Name)
		}
	}
	return strings.Join(names, ", ")
}
