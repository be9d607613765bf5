package auction

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Failure is one feasibility check an offer fails.
type Failure struct {
	Check  string `json:"check"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Diagnose runs every check on o, not only up to the first failure, and
// returns each it fails, in stack order, with its numbers: what a renter
// would have to change to admit it. nil when o is feasible. Feasible
// stops at the first failure because it must be fast over 100,000
// offers; Diagnose is for the few a person reads (`job explain`).
func Diagnose(spec *JobSpec, o *Offer, env Env) []Failure {
	m := newMatcher(spec, env)
	var out []Failure
	for _, c := range m.checks() {
		if why := c.check(o); why != "" {
			out = append(out, Failure{Check: c.name, Reason: why, Detail: m.detail(c.name, o, env.Now)})
		}
	}
	return out
}

// Diagnosed is r with Detail and All filled in by Diagnose; r itself
// when o is not its offer. All is left empty when the offer fails only
// r's check, which r says already: job records keep 100 rejections.
func Diagnosed(spec *JobSpec, r Rejection, o *Offer, env Env) Rejection {
	if o == nil || o.Provider != r.Provider {
		return r
	}
	all := Diagnose(spec, o, env)
	for _, f := range all {
		if f.Check == r.Check {
			r.Detail = f.Detail
		}
	}
	if len(all) > 1 {
		r.All = all
	}
	return r
}

// detail is the numbers behind a failed check, in words; "" where the
// reason says it all.
func (m *matcher) detail(check string, o *Offer, now time.Time) string {
	s := m.spec
	switch check {
	case CheckPrice:
		return o.PriceRefusal(s, now)
	case CheckRegion:
		return fmt.Sprintf("offer in %s, placement.regions %v", o.Region.Continent, s.Placement.Regions)
	case CheckCountry:
		return fmt.Sprintf("offer in %s", o.Region.Country)
	case CheckGPUs:
		return fmt.Sprintf("offer has %s; the job wants %d%s", gpuWords(o.GPUs), s.Resources.GPUs, jobGPUWords(s))
	case CheckHost:
		return fmt.Sprintf("offer has %d CPUs and %d GB; the job wants %d and %d GB",
			o.Host.CPUs, int64(o.Host.MemoryMiB)*bytesPerMiB/1e9, s.Resources.CPUs, s.Resources.MemoryGB)
	case CheckPolicy:
		if m.maxSecs > o.Policy.MaxDurationSec && o.Policy.MaxDurationSec > 0 {
			return fmt.Sprintf("policy allows %s, duration.max %s", secsWords(o.Policy.MaxDurationSec), secsWords(m.maxSecs))
		}
		return fmt.Sprintf("policy allows workloads %v, images %v", o.Policy.Workloads, o.Policy.Images)
	case CheckCalendar:
		if s.Tier == Silver {
			return fmt.Sprintf("available %s from now, duration.max %s", secsWords(availableSecs(o.Windows, m.now)), secsWords(m.maxSecs))
		}
	case CheckRTT:
		if d, ok := m.rttOf(o.Provider); ok {
			return fmt.Sprintf("measured %s, placement.max_rtt_ms %d", d.Round(time.Millisecond), s.Placement.MaxRTT.Milliseconds())
		}
	}
	return ""
}

func gpuWords(gs []GPU) string {
	if len(gs) == 0 {
		return "no GPUs"
	}
	var parts []string
	n := 0
	for i := range gs {
		n++
		if i+1 == len(gs) || gs[i+1].Model != gs[i].Model || gs[i+1].VRAMMiB != gs[i].VRAMMiB {
			parts = append(parts, fmt.Sprintf("%dx%s (%d GB)", n, gs[i].Model, int64(gs[i].VRAMMiB)*bytesPerMiB/1e9))
			n = 0
		}
	}
	return strings.Join(parts, ", ")
}

func jobGPUWords(s *JobSpec) string {
	var b strings.Builder
	if len(s.Resources.Models) > 0 {
		b.WriteString(" of " + strings.Join(s.Resources.Models, "/"))
	}
	if s.Resources.MinVRAMGB > 0 {
		fmt.Fprintf(&b, " with %d GB", s.Resources.MinVRAMGB)
	}
	return b.String()
}

func secsWords(s int64) string {
	return strings.TrimSuffix(strings.TrimSuffix((time.Duration(s)*time.Second).String(), "0s"), "0m")
}

// Relaxation is one change to a spec and how many more offers it admits.
type Relaxation struct {
	Change string `json:"change"` // "raise max_price to 1.2", "drop placement.regions [eu]"
	Admits int    `json:"admits"` // feasible offers gained (net)
}

// MaxRelaxCandidates bounds the changes Relax tries, each a pass over the
// book.
const MaxRelaxCandidates = 32

// Relax finds the one change to spec that admits the most offers: it
// tries, for every check some offer fails, the changes that would pass
// it (raise max_price to an offer's floor in force, widen or drop the
// regions, allow a denied country, allow simulated GPUs, drop the model
// list, lower the GPU count, VRAM, CPUs or memory to what offers have,
// shorten duration.max to what a policy or window allows, raise
// max_rtt_ms, another tier), counts the offers feasible under each, and
// returns the best by net gain (ties: the candidate tried first, the more
// targeted change). nil when no single change admits any.
//
// Every check runs once per offer; a change that only relaxes (all but
// the tier) can admit only offers that fail nothing but the checks it
// touches, so only those are checked again under it.
func Relax(spec *JobSpec, offers []*Offer, env Env) *Relaxation {
	m := newMatcher(spec, env)
	cs := m.checks()
	masks := make([]uint16, len(offers)) // bit i: fails cs[i]
	base := 0
	for i, o := range offers {
		if o == nil {
			masks[i] = ^uint16(0)
			continue
		}
		for j, c := range cs {
			if c.check(o) != "" {
				masks[i] |= 1 << j
			}
		}
		if masks[i] == 0 {
			base++
		}
	}
	var best *Relaxation
	for i, c := range relaxCandidates(spec, offers, masks, m) {
		if i == MaxRelaxCandidates {
			break
		}
		s := *spec
		c.apply(&s)
		var gain int
		if c.touches == 0 {
			gain = countFeasible(&s, offers, env) - base
		} else {
			cs2 := newMatcher(&s, env).checks()
			for k, o := range offers {
				if masks[k] != 0 && masks[k]&^c.touches == 0 && passes(cs2, o) {
					gain++
				}
			}
		}
		if gain > 0 && (best == nil || gain > best.Admits) {
			best = &Relaxation{Change: c.change, Admits: gain}
		}
	}
	return best
}

func passes(cs []namedCheck, o *Offer) bool {
	for _, c := range cs {
		if c.check(o) != "" {
			return false
		}
	}
	return true
}

func countFeasible(spec *JobSpec, offers []*Offer, env Env) int {
	cs := newMatcher(spec, env).checks()
	n := 0
	for _, o := range offers {
		if o != nil && passes(cs, o) {
			n++
		}
	}
	return n
}

// checkBits is the mask of the named checks, bit i for
// FeasibilityChecks[i] (the order of matcher.checks).
func checkBits(names ...string) uint16 {
	var b uint16
	for i, c := range FeasibilityChecks {
		if slices.Contains(names, c) {
			b |= 1 << i
		}
	}
	return b
}

type relaxation struct {
	change  string
	touches uint16 // the checks it can turn from fail to pass; 0: any, and it may fail others (a tier)
	apply   func(*JobSpec)
}

// relaxCandidates lists the changes worth trying, the most targeted of
// each kind first, each once.
func relaxCandidates(spec *JobSpec, offers []*Offer, masks []uint16, m *matcher) []relaxation {
	var out []relaxation
	seen := map[string]bool{}
	add := func(change string, touches uint16, apply func(*JobSpec)) {
		if !seen[change] {
			seen[change] = true
			out = append(out, relaxation{change, touches, apply})
		}
	}
	fails := func(mask uint16, check string) bool { return mask&checkBits(check) != 0 }
	var maxFloor Credits
	var continents, countries []string
	var vrams, gpus, cpus, mems, durs []int64
	var maxRTT time.Duration
	simulated := false
	start := time.Unix(m.now, 0)
	if spec.Tier == Gold {
		start = spec.Start
	}
	for i, o := range offers {
		mask := masks[i]
		if o == nil || mask == 0 {
			continue
		}
		if fails(mask, CheckPrice) {
			maxFloor = max(maxFloor, o.FloorFor(spec.Tier, start, spec.Duration.Max))
		}
		if fails(mask, CheckRegion) {
			continents = appendNew(continents, o.Region.Continent)
		}
		if fails(mask, CheckCountry) {
			countries = appendNew(countries, o.Region.Country)
		}
		simulated = simulated || fails(mask, CheckSimulated)
		if fails(mask, CheckGPUs) {
			gpus = appendNew(gpus, int64(len(o.GPUs)))
			for _, g := range o.GPUs {
				if m.acceptsModel(g.Model) {
					vrams = appendNew(vrams, int64(g.VRAMMiB)*bytesPerMiB/1e9)
				}
			}
		}
		if fails(mask, CheckHost) {
			cpus = appendNew(cpus, int64(o.Host.CPUs))
			mems = appendNew(mems, int64(o.Host.MemoryMiB)*bytesPerMiB/1e9)
		}
		if d := o.Policy.MaxDurationSec; fails(mask, CheckPolicy) && d > 0 && d < m.maxSecs {
			durs = appendNew(durs, d)
		}
		if d := availableSecs(o.Windows, m.now) / 60 * 60; fails(mask, CheckCalendar) && spec.Tier == Silver && d > 0 && d < m.maxSecs {
			durs = appendNew(durs, d)
		}
		if fails(mask, CheckRTT) && m.rttOf != nil {
			if d, ok := m.rttOf(o.Provider); ok {
				maxRTT = max(maxRTT, d)
			}
		}
	}
	if maxFloor > spec.MaxPrice {
		add("raise max_price to "+FormatCredits(maxFloor), checkBits(CheckPrice), func(s *JobSpec) { s.MaxPrice = maxFloor })
	}
	for _, c := range continents {
		add("add "+c+" to placement.regions", checkBits(CheckRegion), func(s *JobSpec) {
			s.Placement.Regions = append(slices.Clone(s.Placement.Regions), c)
		})
	}
	if len(continents) > 1 {
		add(fmt.Sprintf("drop placement.regions %v", spec.Placement.Regions), checkBits(CheckRegion), func(s *JobSpec) { s.Placement.Regions = nil })
	}
	for _, c := range countries {
		add("remove "+c+" from placement.deny_countries", checkBits(CheckCountry), func(s *JobSpec) {
			s.Placement.DenyCountries = slices.DeleteFunc(slices.Clone(s.Placement.DenyCountries), func(d string) bool { return d == c })
		})
	}
	if simulated {
		add("set allow_simulated: true", checkBits(CheckSimulated), func(s *JobSpec) { s.AllowSimulated = true })
	}
	// Fewer or other GPUs also leave more of a booked offer free.
	gpuChecks := checkBits(CheckGPUs, CheckCalendar)
	if len(spec.Resources.Models) > 0 && len(gpus) > 0 {
		add(fmt.Sprintf("drop resources.models %v", spec.Resources.Models), gpuChecks, func(s *JobSpec) { s.Resources.Models = nil })
	}
	for _, v := range sortedDesc(gpus) { // the largest value below the spec's first: the smallest change
		if v > 0 && v < int64(spec.Resources.GPUs) {
			add(fmt.Sprintf("lower resources.gpus to %d", v), gpuChecks, func(s *JobSpec) { s.Resources.GPUs = int(v) })
		}
	}
	for _, v := range sortedDesc(vrams) {
		if v < int64(spec.Resources.MinVRAMGB) {
			add(fmt.Sprintf("lower resources.min_vram_gb to %d", v), gpuChecks, func(s *JobSpec) { s.Resources.MinVRAMGB = int(v) })
		}
	}
	for _, v := range sortedDesc(cpus) {
		if v < int64(spec.Resources.CPUs) {
			add(fmt.Sprintf("lower resources.cpus to %d", v), checkBits(CheckHost), func(s *JobSpec) { s.Resources.CPUs = int(v) })
		}
	}
	for _, v := range sortedDesc(mems) {
		if v < int64(spec.Resources.MemoryGB) {
			add(fmt.Sprintf("lower resources.memory_gb to %d", v), checkBits(CheckHost), func(s *JobSpec) { s.Resources.MemoryGB = int(v) })
		}
	}
	// A shorter job meets fewer price periods and fits more windows.
	for _, v := range sortedDesc(durs) {
		d := time.Duration(v) * time.Second
		add("shorten duration.max to "+secsWords(v), checkBits(CheckPolicy, CheckCalendar, CheckPrice), func(s *JobSpec) {
			s.Duration.Max, s.Duration.Expected = d, min(d, s.Duration.Expected)
		})
	}
	if maxRTT > 0 {
		ms := (maxRTT + time.Millisecond - 1) / time.Millisecond * time.Millisecond
		add(fmt.Sprintf("raise placement.max_rtt_ms to %d", ms.Milliseconds()), checkBits(CheckRTT), func(s *JobSpec) { s.Placement.MaxRTT = ms })
	}
	for _, t := range []Tier{Silver, Bronze} {
		if t != spec.Tier {
			add("use tier "+string(t), 0, func(s *JobSpec) { s.Tier = t; s.Start = time.Time{} })
		}
	}
	return out
}

func sortedDesc(s []int64) []int64 {
	s = slices.Clone(s)
	slices.Sort(s)
	slices.Reverse(s)
	return s
}

func appendNew[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
