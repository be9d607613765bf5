package auction

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
)

// facts are what queries look at, derived once per offer when the book
// stores it, so that a query over 100,000 offers compares integers and
// short strings and allocates nothing per offer.
type facts struct {
	// Read for every offer by every query: first, to share a cache line.
	expires   int64
	withdrawn bool
	simulated bool       // any GPU is simulated
	workloads uint8      // bit i = Workloads[i]
	continent string     // an element of Continents: compares by pointer
	country   string     // interned by the book
	groups    []gpuGroup // one per distinct model
	prices    [3]int64   // gold, silver, bronze in Credits; 0 = tier not offered

	all      gpuSel // over every GPU, for queries without gpu clauses
	provider string
	cpus     int64
	memory   int64 // bytes
	datasets []string
	maxDur   int64 // seconds; math.MaxInt64 when the policy sets no limit
	windows  []Window
	booked   []Booking
	pricing  *Pricing // nil: the floors at every hour, no surge
	// rules are pricing's periods compiled, in its order (ok false: an
	// invalid rule, never in force), and loc its zone; nil when no
	// period can be in force.
	rules []compiledPeriod
	loc   *time.Location
	// surges: pricing has a surge, which a booking can raise the price
	// by. Kept here so that most offers' price in effect is read
	// without touching their Pricing (a cache miss per offer).
	surges bool
}

type compiledPeriod struct {
	rule weeklyRule
	ok   bool
}

// gpuGroup is the GPUs of one model within an offer.
type gpuGroup struct {
	hash  uint64 // of model: compared first, so a query need not chase the string
	model string // lower case: gpu clauses compare case-insensitively
	sel   gpuSel
}

// modelHash is FNV-1a; collisions only cost a string comparison.
func modelHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// gpuSel summarises a selection of GPUs the way gpus, vram and cc see it.
type gpuSel struct {
	count int64
	vram  int64 // smallest, bytes
	cc    int64 // lowest, millionths (8.9 = 8_900_000)
}

func (s gpuSel) add(o gpuSel) gpuSel {
	if s.count == 0 {
		return o
	}
	return gpuSel{s.count + o.count, min(s.vram, o.vram), min(s.cc, o.cc)}
}

const bytesPerMiB = 1 << 20

func factsOf(o *Offer) facts {
	f := facts{
		continent: canonicalContinent(o.Region.Continent),
		country:   o.Region.Country,
		provider:  o.Provider,
		prices:    [3]int64{int64(o.Prices.Gold), int64(o.Prices.Silver), int64(o.Prices.Bronze)},
		cpus:      int64(o.Host.CPUs),
		memory:    int64(o.Host.MemoryMiB) * bytesPerMiB,
		maxDur:    o.Policy.MaxDurationSec,
		expires:   o.ExpiresAt,
		withdrawn: o.Withdrawn,
		windows:   o.Windows,
		booked:    o.Booked,
	}
	if !o.Pricing.IsZero() {
		f.pricing, f.surges = o.Pricing, o.Pricing.SurgeBP > 0
		if loc, err := loadZone(o.Pricing.TimeZone); err == nil && len(o.Pricing.Periods) > 0 {
			f.loc = loc
			for _, pp := range o.Pricing.Periods {
				r, err := pp.Weekly.compile()
				f.rules = append(f.rules, compiledPeriod{r, err == nil})
			}
		}
	}
	if f.maxDur == 0 {
		f.maxDur = math.MaxInt64
	}
	for _, g := range o.GPUs {
		cc, _ := parseComputeCap(g.ComputeCap) // validated; 0 if not
		one := gpuSel{1, int64(g.VRAMMiB) * bytesPerMiB, cc}
		f.all = f.all.add(one)
		f.simulated = f.simulated || g.Simulated
		m := strings.ToLower(g.Model)
		i := 0
		for i < len(f.groups) && f.groups[i].model != m {
			i++
		}
		if i == len(f.groups) {
			f.groups = append(f.groups, gpuGroup{hash: modelHash(m), model: m})
		}
		f.groups[i].sel = f.groups[i].sel.add(one)
	}
	for i, w := range Workloads {
		if contains(o.Policy.Workloads, w) {
			f.workloads |= 1 << uint(i)
		}
	}
	for _, d := range o.Datasets {
		if k, err := datasetKey(d); err == nil {
			f.datasets = append(f.datasets, k)
		}
	}
	return f
}

func canonicalContinent(c string) string {
	for _, k := range Continents {
		if k == c {
			return k
		}
	}
	return c
}

// datasetKey identifies a dataset by CID with version 0 folded into 1, so
// that Qm... and bafy... spellings of one dag-pb root compare equal.
func datasetKey(s string) (string, error) {
	c, err := cid.Decode(s)
	if err != nil {
		return "", err
	}
	return cid.NewCidV1(c.Type(), c.Hash()).KeyString(), nil
}

// parseMicro parses a non-negative decimal with at most 6 fractional
// digits into millionths, exactly: prices are Credits (millionths) and must
// compare without floating-point rounding.
func parseMicro(s string) (int64, error) {
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" || len(intPart) > 9 || len(frac) > 6 {
		return 0, fmt.Errorf("%q: want a decimal like 1.5 (at most 9 integer and 6 fractional digits, no sign)", s)
	}
	if strings.Contains(s, ".") && frac == "" {
		return 0, fmt.Errorf("%q: nothing after the decimal point", s)
	}
	var v int64
	for _, r := range intPart + frac + strings.Repeat("0", 6-len(frac)) {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q: want a decimal like 1.5 (digits and one '.')", s)
		}
		v = v*10 + int64(r-'0')
	}
	return v, nil
}

// parseComputeCap parses a CUDA compute capability, "major.minor".
func parseComputeCap(s string) (int64, error) {
	major, minor, ok := strings.Cut(s, ".")
	if !ok || len(major) < 1 || len(major) > 2 || len(minor) < 1 || len(minor) > 2 {
		return 0, fmt.Errorf("%q: want major.minor such as 8.9", s)
	}
	v, err := parseMicro(s)
	if err != nil {
		return 0, errors.New("compute capability " + err.Error())
	}
	return v, nil
}
