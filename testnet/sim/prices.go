package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/ondemand"
	"github.com/gleaner-net/gleaner/testnet/traces"
)

// The trace files this package reads, by name inside the traces directory.
const (
	priceListFile = "gpu_prices_vast_2026.csv"
	nodes2023File = "alibaba_v2023_openb_node_list_gpu_node.csv"
	nodes2026File = "alibaba_v2026_spot_node_info_df.csv"
	pods2023File  = "alibaba_v2023_openb_pod_list_default.csv"
	dlrm2025File  = "alibaba_v2025_disaggregated_DLRM_trace.csv"
	availFitsFile = "availability_fits.json"
	// defaultTraceDir "" is the public traces built into gleaner
	// (testnet/traces); a directory of one's own replaces them.
	defaultTraceDir = ""
)

// TraceDir is where the trace files of dir are: dir itself, or for "" a
// folder holding the built-in traces (testnet/traces.Dir).
func TraceDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	return traces.Dir()
}

// gpuModel is what a trace's GPU code becomes: the public name offers use,
// the memory per GPU and the price-list model its on-demand price is taken
// from.
type gpuModel struct {
	Name    string
	VRAMMiB int
	PriceAs string // a gpu_model of gpu_prices_vast_2026.csv
	// StandIn is set for undisclosed codes: Name is our stand-in, not
	// what the cluster really ran.
	StandIn bool
}

// modelTable maps the Alibaba node lists' and pod list's GPU codes to public
// models. The price list has no T4, P100, A800 or H800, and only the 40 GB
// A100, so those are priced by their nearest listed equivalent: T4 and P100
// as the RTX3060 (the cheapest listed card, of like throughput), both V100
// sizes as the V100, A100/A800 80 GB as the A100, H800 as the H100. The codes
// G1, G2, G3, GPU-series-1 and GPU-series-2 are undisclosed; they get
// stand-ins of the same era and node shape (T4, A10, V100-32GB, L40S,
// A100-80GB), named as stand-ins in Supply.Sources.
var modelTable = map[string]gpuModel{
	"A10":            {Name: "A10", VRAMMiB: 24576, PriceAs: "A10"},
	"T4":             {Name: "T4", VRAMMiB: 16384, PriceAs: "RTX3060"},
	"P100":           {Name: "P100-16GB", VRAMMiB: 16384, PriceAs: "RTX3060"},
	"V100M16":        {Name: "V100-16GB", VRAMMiB: 16384, PriceAs: "V100"},
	"V100M32":        {Name: "V100-32GB", VRAMMiB: 32768, PriceAs: "V100"},
	"A100-SXM4-80GB": {Name: "A100-80GB", VRAMMiB: 81920, PriceAs: "A100"},
	"A800-SXM4-80GB": {Name: "A800-80GB", VRAMMiB: 81920, PriceAs: "A100"},
	"H800":           {Name: "H800-80GB", VRAMMiB: 81920, PriceAs: "H100"},
	"G1":             {Name: "T4", VRAMMiB: 16384, PriceAs: "RTX3060", StandIn: true},
	"G2":             {Name: "A10", VRAMMiB: 24576, PriceAs: "A10", StandIn: true},
	"G3":             {Name: "V100-32GB", VRAMMiB: 32768, PriceAs: "V100", StandIn: true},
	"GPU-series-1":   {Name: "L40S", VRAMMiB: 49152, PriceAs: "L40S", StandIn: true},
	"GPU-series-2":   {Name: "A100-80GB", VRAMMiB: 81920, PriceAs: "A100", StandIn: true},
}

// modelFor maps a trace's GPU code to its public model.
func modelFor(code string) (gpuModel, bool) {
	m, ok := modelTable[strings.TrimSpace(code)]
	return m, ok
}

// location is one place the price list has an offer in.
type location struct{ Country, Continent string }

// priceList is gpu_prices_vast_2026.csv digested: the median on-demand
// price per GPU-hour of each listed model, and every offer's location (one
// entry per offer, so sampling it weights places by how many offers they
// have).
type priceList struct {
	PerGPU    map[string]auction.Credits
	Locations []location
}

// readPriceList reads the price list through auction/ondemand, the parser
// the node uses for its market page too: a price is usd_per_hour /
// gpu_count, exact in credits (1 credit = 1 USD); the median of an even
// count is the mean of the middle two, in whole millionths.
func readPriceList(dir string) (*priceList, error) {
	dir, err := TraceDir(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, priceListFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (gleaner sim --traces names the directory; without it the built-in traces are used)", err)
	}
	defer f.Close()
	l, err := ondemand.Parse(f, path)
	if err != nil {
		return nil, err
	}
	pl := &priceList{PerGPU: l.PerGPU}
	for _, loc := range l.Locations {
		pl.Locations = append(pl.Locations, location{loc.Country, loc.Continent})
	}
	return pl, nil
}

// onDemandFor is the on-demand price of a public model, through the table.
func (pl *priceList) onDemandFor(m gpuModel) (auction.Credits, error) {
	p, ok := pl.PerGPU[m.PriceAs]
	if !ok {
		return 0, fmt.Errorf("%s: no %s offer to price %s by", priceListFile, m.PriceAs, m.Name)
	}
	return p, nil
}

// OnDemandPrices is the on-demand price per GPU-hour of every model the
// simulator knows: each public model of the trace table (through its
// nearest listed equivalent) and each price-list model under its own name.
// It is what LoadSupplyCSV needs to compute savings.
func OnDemandPrices(tracesDir string) (map[string]auction.Credits, error) {
	pl, err := readPriceList(tracesDir)
	if err != nil {
		return nil, err
	}
	out := map[string]auction.Credits{}
	for name, p := range pl.PerGPU {
		out[name] = p
	}
	for _, code := range sortedKeys(modelTable) {
		m := modelTable[code]
		p, err := pl.onDemandFor(m)
		if err != nil {
			return nil, err
		}
		out[m.Name] = p
	}
	return out, nil
}

// floors turns the on-demand price into a provider's tier floors: silver
// is onDemand × SilverOfOnDemandBP × exp(noise·z), gold and bronze are
// fixed shares of that silver, each rounded once from the float. Rounding
// is nudged so that bronze < silver < gold always holds.
func floors(onDemand auction.Credits, cfg SupplyConfig, z float64) auction.Prices {
	silver := float64(onDemand) * float64(cfg.SilverOfOnDemandBP) / 1e4 * math.Exp(cfg.PriceNoise*z)
	p := auction.Prices{
		Gold:   auction.Credits(math.Round(silver * float64(cfg.GoldOverSilverBP) / 1e4)),
		Silver: auction.Credits(math.Round(silver)),
		Bronze: auction.Credits(math.Round(silver * float64(cfg.BronzeOfSilverBP) / 1e4)),
	}
	p.Silver = max(p.Silver, 2)
	p.Bronze = min(max(p.Bronze, 1), p.Silver-1)
	p.Gold = max(p.Gold, p.Silver+1)
	return p
}

// supplySources says where each part of the supply came from.
func supplySources(cfg SupplyConfig, s *Supply) []string {
	var standIns, priced []string
	for _, code := range sortedKeys(modelTable) {
		m := modelTable[code]
		if m.StandIn {
			standIns = append(standIns, code+"->"+m.Name)
		}
		if m.PriceAs != m.Name {
			priced = append(priced, m.Name+" as "+m.PriceAs)
		}
	}
	var models []string
	for _, m := range sortedKeys(s.OnDemand) {
		models = append(models, m+" "+auction.FormatCredits(s.OnDemand[m]))
	}
	avail := fmt.Sprintf("windows: %s, trace %s, %s fit, random phase; clipped to %.4g days, merged, under %d s dropped",
		availFitsFile, cfg.Availability, cfg.Fit, cfg.Days, minWindow)
	if cfg.Availability == AvailAlways {
		avail = fmt.Sprintf("windows: always available over %.4g days", cfg.Days)
	}
	return []string{
		fmt.Sprintf("models: undisclosed codes given stand-ins %v", standIns),
		fmt.Sprintf("on-demand: %s, median usd_per_hour/gpu_count per model; priced by nearest listed equivalent %v", priceListFile, priced),
		fmt.Sprintf("on-demand per GPU-hour used: %v", models),
		fmt.Sprintf("regions: %s offer locations, one drawn per provider", priceListFile),
		fmt.Sprintf("floors: silver %d bp of on-demand × exp(%.3g·N(0,1)), gold %d bp and bronze %d bp of silver",
			cfg.SilverOfOnDemandBP, cfg.PriceNoise, cfg.GoldOverSilverBP, cfg.BronzeOfSilverBP),
		avail,
		fmt.Sprintf("providers: %d, seed %d, adversaries %v", len(s.Providers), cfg.Seed, adversaryCounts(s.Providers)),
	}
}

// adversaryCounts is "skip=3 fake=1", in sorted order; "none" if honest.
func adversaryCounts(ps []Provider) string {
	n := map[Behaviour]int{}
	for _, p := range ps {
		if p.Behaviour != Honest {
			n[p.Behaviour]++
		}
	}
	out := ""
	for _, b := range sortedKeys(n) {
		out += fmt.Sprintf(" %s=%d", b, n[b])
	}
	if out == "" {
		return "none"
	}
	return out[1:]
}

// traceRows is a trace CSV read whole, with columns found by name.
type traceRows struct {
	col  map[string]int
	rows []traceRow
}

type traceRow struct {
	line   int
	fields []string
	col    map[string]int
}

func (r traceRow) get(name string) string { return strings.TrimSpace(r.fields[r.col[name]]) }

// readTraceCSV reads a trace file (they are small: at most a few MB) and
// checks that it has the named columns.
func readTraceCSV(path string, need ...string) (*traceRows, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w (gleaner sim --traces names the directory; without it the built-in traces are used)", err)
	}
	defer f.Close()
	cr := csv.NewReader(f)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s:1: reading the header: %w", path, err)
	}
	t := &traceRows{col: map[string]int{}}
	for i, h := range header {
		t.col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, n := range need {
		if _, ok := t.col[n]; !ok {
			return nil, fmt.Errorf("%s:1: no column %q in header %q", path, n, strings.Join(header, ","))
		}
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		line, _ := cr.FieldPos(0)
		t.rows = append(t.rows, traceRow{line: line, fields: rec, col: t.col})
	}
}

// sortedKeys is a map's keys in order, so that nothing depends on Go's
// map iteration order.
func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
