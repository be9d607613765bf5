package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
)

// SupplyConfig says how BuildSupply draws providers from the traces.
type SupplyConfig struct {
	Providers int     `json:"providers"`
	Days      float64 `json:"days,omitempty"`      // horizon; windows cover [0, Days*86400) seconds
	TracesDir string  `json:"tracesdir,omitempty"` // "" (default): the built-in traces
	// Availability is the trace providers' idle windows follow:
	// Microsoft99, Nd07cpu, mixed (default: each provider one of the two,
	// even odds) or always (one window over the horizon).
	Availability string  `json:"availability,omitempty"`
	Fit          string  `json:"fit,omitempty"`        // weibull (default), lognormal, gamma, exponential
	PriceNoise   float64 `json:"pricenoise,omitempty"` // sd of the log of each provider's price factor; default 0.15
	// Floors relative to the silver floor, in basis points: gold 13000
	// (30% above silver), bronze 6000 (40% below) by default.
	GoldOverSilverBP int64 `json:"goldoversilverbp,omitempty"`
	BronzeOfSilverBP int64 `json:"bronzeofsilverbp,omitempty"`
	// SilverOfOnDemandBP is the silver floor as a share of the model's
	// on-demand price; default 6000 (idle capacity sells at 60%).
	SilverOfOnDemandBP int64 `json:"silverofondemandbp,omitempty"`
	// AdversaryShare is the share of providers per adversary behaviour
	// (Skip, Fake, Abandon, Refuse); default none.
	AdversaryShare map[Behaviour]float64 `json:"adversaryshare,omitempty"`
	Seed           uint64                `json:"seed,omitempty"`
}

// DefaultSupplyConfig is 200 honest providers over 7 days.
func DefaultSupplyConfig() SupplyConfig {
	return SupplyConfig{
		Providers: 200, Days: 7, TracesDir: defaultTraceDir,
		Availability: AvailMixed, Fit: FitWeibull, PriceNoise: 0.15,
		GoldOverSilverBP: 13000, BronzeOfSilverBP: 6000, SilverOfOnDemandBP: 6000,
		Seed: 1,
	}
}

// The random streams of one seed, one per purpose, so that changing how
// one part draws leaves the others as they were.
const (
	streamNodes uint64 = iota + 1
	streamRegions
	streamPrices
	streamWindows
	streamAdversaries
	streamDemandJobs
	streamDemandSubmits
	streamDemandRenters
	streamConvert
	streamDemandModels
)

func (c *SupplyConfig) defaults() error {
	d := DefaultSupplyConfig()
	if c.TracesDir == "" {
		c.TracesDir = d.TracesDir
	}
	if c.Availability == "" {
		c.Availability = d.Availability
	}
	if c.Fit == "" {
		c.Fit = d.Fit
	}
	if c.PriceNoise == 0 {
		c.PriceNoise = d.PriceNoise
	}
	if c.GoldOverSilverBP == 0 {
		c.GoldOverSilverBP = d.GoldOverSilverBP
	}
	if c.BronzeOfSilverBP == 0 {
		c.BronzeOfSilverBP = d.BronzeOfSilverBP
	}
	if c.SilverOfOnDemandBP == 0 {
		c.SilverOfOnDemandBP = d.SilverOfOnDemandBP
	}
	switch {
	case c.Providers < 1 || c.Providers > 1_000_000:
		return fmt.Errorf("providers %d: expected 1..1000000", c.Providers)
	case !(c.Days > 0) || c.Days > 3650:
		return fmt.Errorf("days %v: expected more than 0, at most 3650", c.Days)
	case c.PriceNoise < 0 || c.PriceNoise > 2:
		return fmt.Errorf("price noise %v: expected 0..2", c.PriceNoise)
	case c.GoldOverSilverBP <= 10000 || c.GoldOverSilverBP > 100000:
		return fmt.Errorf("gold floor %d bp of silver: expected 10001..100000", c.GoldOverSilverBP)
	case c.BronzeOfSilverBP <= 0 || c.BronzeOfSilverBP >= 10000:
		return fmt.Errorf("bronze floor %d bp of silver: expected 1..9999", c.BronzeOfSilverBP)
	case c.SilverOfOnDemandBP <= 0 || c.SilverOfOnDemandBP > 100000:
		return fmt.Errorf("silver floor %d bp of on-demand: expected 1..100000", c.SilverOfOnDemandBP)
	}
	switch c.Availability {
	case TraceMicrosoft99, TraceNd07cpu, AvailMixed, AvailAlways:
	default:
		return fmt.Errorf("availability %q: expected Microsoft99, Nd07cpu, mixed or always", c.Availability)
	}
	return nil
}

// node is one GPU node of the Alibaba lists, mapped to a public model.
type node struct {
	model gpuModel
	gpus  int
}

// readNodes pools both node lists. Nodes without GPUs are skipped; more
// than 8 (none in the 2023/2026 lists) are clamped to 8, the most one
// provider sells.
func readNodes(dir string) ([]node, []string, error) {
	dir, err := TraceDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var out []node
	var notes []string
	for _, src := range []struct{ file, model, count string }{
		{nodes2023File, "model", "gpu"},
		{nodes2026File, "gpu_model", "gpu_capacity_num"},
	} {
		path := filepath.Join(dir, src.file)
		rows, err := readTraceCSV(path, src.model, src.count)
		if err != nil {
			return nil, nil, err
		}
		skipped, clamped := 0, 0
		for _, r := range rows.rows {
			m, ok := modelFor(r.get(src.model))
			if !ok {
				return nil, nil, fmt.Errorf("%s:%d: GPU model %q is not in the model table", path, r.line, r.get(src.model))
			}
			n, err := strconv.Atoi(r.get(src.count))
			if err != nil {
				return nil, nil, fmt.Errorf("%s:%d: %s %q is not a whole number", path, r.line, src.count, r.get(src.count))
			}
			if n < 1 {
				skipped++
				continue
			}
			if n > 8 {
				n, clamped = 8, clamped+1
			}
			out = append(out, node{m, n})
		}
		notes = append(notes, fmt.Sprintf("nodes: %s, %d nodes (%d without GPUs skipped, %d clamped to 8 GPUs)",
			src.file, len(rows.rows)-skipped, skipped, clamped))
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("%s: no GPU nodes", dir)
	}
	return out, notes, nil
}

// BuildSupply draws cfg.Providers providers: model and GPU count from the
// pooled Alibaba node lists, a location from the price list's offers,
// floors from the on-demand price with per-provider noise, and idle
// windows from the availability fits.
func BuildSupply(cfg SupplyConfig) (*Supply, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	nodes, notes, err := readNodes(cfg.TracesDir)
	if err != nil {
		return nil, err
	}
	pl, err := readPriceList(cfg.TracesDir)
	if err != nil {
		return nil, err
	}
	var fits map[string]upDown
	if cfg.Availability != AvailAlways {
		if fits, err = loadAvailability(cfg.TracesDir, cfg.Fit); err != nil {
			return nil, err
		}
	}
	rng := func(k uint64) *rand.Rand { return rand.New(rand.NewPCG(cfg.Seed, k)) }
	rNodes, rRegions, rPrices, rWindows := rng(streamNodes), rng(streamRegions), rng(streamPrices), rng(streamWindows)
	horizon := int64(cfg.Days * 86400)
	s := &Supply{OnDemand: map[string]auction.Credits{}}
	for i := 0; i < cfg.Providers; i++ {
		n := nodes[rNodes.IntN(len(nodes))]
		od, err := pl.onDemandFor(n.model)
		if err != nil {
			return nil, err
		}
		s.OnDemand[n.model.Name] = od
		loc := pl.Locations[rRegions.IntN(len(pl.Locations))]
		p := Provider{
			ID: fmt.Sprintf("p%05d", i), Model: n.model.Name, VRAMMiB: n.model.VRAMMiB, GPUs: n.gpus,
			Country: loc.Country, Continent: loc.Continent,
			Floors: floors(od, cfg, rPrices.NormFloat64()),
		}
		switch trace := cfg.Availability; trace {
		case AvailAlways:
			p.Windows = []Span{{0, horizon}}
		default:
			if trace == AvailMixed {
				trace = [2]string{TraceMicrosoft99, TraceNd07cpu}[rWindows.IntN(2)]
			}
			p.Windows = sampleWindows(rWindows, fits[trace], horizon)
		}
		s.Providers = append(s.Providers, p)
	}
	if err := assignAdversaries(s.Providers, cfg.AdversaryShare, rng(streamAdversaries)); err != nil {
		return nil, err
	}
	s.Sources = append(notes, supplySources(cfg, s)...)
	return s, nil
}

// assignAdversaries makes round(share × n) providers of each behaviour, in
// sorted behaviour order, drawing among those still honest.
func assignAdversaries(ps []Provider, shares map[Behaviour]float64, r *rand.Rand) error {
	perm := r.Perm(len(ps))
	next, total := 0, 0.0
	for _, b := range sortedKeys(shares) {
		share := shares[b]
		switch b {
		case Skip, Fake, Abandon, Refuse:
		default:
			return fmt.Errorf("adversary share: %q is not a provider behaviour (skip, fake, abandon, refuse)", b)
		}
		if total += share; share < 0 || total > 1+1e-9 {
			return fmt.Errorf("adversary share: %q %v makes shares negative or above 1", b, share)
		}
		k := int(math.Round(share * float64(len(ps))))
		for ; k > 0 && next < len(ps); k-- {
			ps[perm[next]].Behaviour = b
			next++
		}
	}
	return nil
}

// CheckFeasible says before a run what no strategy could serve: jobs
// whose models no provider has, whose region nobody is in, or that need
// more GPUs than any provider of their models and region has. Each line
// names the model or region, how many jobs ask for it and the first.
// Prices and windows are not checked: those are the market's to settle.
func CheckFeasible(s *Supply, d *Demand) error {
	type ask struct {
		models []string
		region string
	}
	type problem struct{ first, n int }
	asks := map[string]ask{}
	var order []string
	need := map[string][]int{} // ask key -> job indexes
	for i, j := range d.Jobs {
		k := fmt.Sprintf("%q@%s", j.Models, j.Region)
		if _, ok := asks[k]; !ok {
			asks[k] = ask{j.Models, j.Region}
			order = append(order, k)
		}
		need[k] = append(need[k], i)
	}
	problems := map[string]*problem{}
	var lines []string // problem keys in order of first job
	note := func(msg string, i int) {
		if p, ok := problems[msg]; ok {
			p.n++
			return
		}
		problems[msg] = &problem{i, 1}
		lines = append(lines, msg)
	}
	for _, k := range order {
		a := asks[k]
		r := reachOf(s, a.models, a.region)
		modelFound, regionFound, most := r.modelFound, r.regionFound, r.most
		where := "anywhere"
		if a.region != "" {
			where = fmt.Sprintf("in region %q", a.region)
		}
		models := "any model"
		if len(a.models) > 0 {
			models = "model " + strings.Join(a.models, "|")
		}
		for _, i := range need[k] {
			j := d.Jobs[i]
			switch {
			case !modelFound:
				note(fmt.Sprintf("no provider has %s", models), i)
			case !regionFound:
				note(fmt.Sprintf("no provider is in region %q", a.region), i)
			case most == 0:
				note(fmt.Sprintf("no provider has %s %s", models, where), i)
			case j.GPUs > most:
				note(fmt.Sprintf("%d GPUs of %s wanted %s but the most any such provider has is %d",
					j.GPUs, models, where, most), i)
			}
		}
	}
	if len(lines) == 0 {
		return nil
	}
	sort.SliceStable(lines, func(a, b int) bool { return problems[lines[a]].first < problems[lines[b]].first })
	out := "impossible for this supply:"
	for _, l := range lines {
		p := problems[l]
		out += fmt.Sprintf("\n  %s: %d jobs ask for it (first %s)", l, p.n, d.Jobs[p.first].ID)
	}
	return errors.New(out)
}
