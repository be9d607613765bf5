// Package ondemand reads a list of on-demand GPU prices, in the format of
// the Vast.ai price snapshot the project's traces carry
// (gpu_prices_vast_2026.csv: gpu_model, gpu_count, usd_per_hour,
// location), into the median price per GPU-hour of each model. The
// market simulator prices its supply from it (testnet/sim) and the node
// shows it beside the market's prices when the owner names such a file
// (market.on_demand_prices); one parser, so both read a file alike.
//
// Money: 1 credit is taken as 1 USD, as the simulator takes it, so a
// price is exact in auction.Credits (micro-credits); usd_per_hour may
// have at most 6 decimal places.
package ondemand

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
)

// Location is where one listed offer is: an ISO country and a continent
// code, as offers' regions carry them.
type Location struct{ Country, Continent string }

// List is a price list digested.
type List struct {
	// PerGPU is the median on-demand price per GPU-hour of each listed
	// model (usd_per_hour / gpu_count); the median of an even count is the
	// mean of the middle two, in whole micro-credits.
	PerGPU map[string]auction.Credits
	// Locations has one entry per listed offer, in file order, so that
	// sampling it weights places by how many offers they have.
	Locations []Location
}

// Limits on a file: a price list is a few hundred rows; these stop a
// mistaken path (a disk image, a log) from filling memory.
const (
	MaxRows   = 100_000
	maxModels = 1_000
)

// Load reads the list at path.
func Load(path string) (*List, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a list from r; name is what errors call it ("name:line: ...").
func Parse(r io.Reader, name string) (*List, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s:1: reading the header: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, n := range []string{"gpu_model", "gpu_count", "usd_per_hour", "location"} {
		if _, ok := col[n]; !ok {
			return nil, fmt.Errorf("%s:1: no column %q in header %q", name, n, strings.Join(header, ","))
		}
	}
	per := map[string][]auction.Credits{}
	l := &List{PerGPU: map[string]auction.Credits{}}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if len(l.Locations) == MaxRows {
			return nil, fmt.Errorf("%s:%d: more than %d rows: not a price list", name, line, MaxRows)
		}
		get := func(c string) string { return strings.TrimSpace(rec[col[c]]) }
		model := get("gpu_model")
		if model == "" {
			return nil, fmt.Errorf("%s:%d: gpu_model is empty", name, line)
		}
		n, err := strconv.Atoi(get("gpu_count"))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s:%d: gpu_count %q is not a positive whole number", name, line, get("gpu_count"))
		}
		usd, err := auction.ParseDecimalCredits(get("usd_per_hour"))
		if err != nil || usd <= 0 {
			return nil, fmt.Errorf("%s:%d: usd_per_hour %q is not a positive decimal", name, line, get("usd_per_hour"))
		}
		if _, ok := per[model]; !ok && len(per) == maxModels {
			return nil, fmt.Errorf("%s:%d: more than %d models: not a price list", name, line, maxModels)
		}
		per[model] = append(per[model], usd/auction.Credits(n))
		parts := strings.Split(get("location"), ",")
		if len(parts) < 3 {
			return nil, fmt.Errorf("%s:%d: location %q is not \"region, country, continent\"", name, line, get("location"))
		}
		country := strings.ToUpper(strings.TrimSpace(parts[len(parts)-2]))
		continent := strings.ToLower(strings.TrimSpace(parts[len(parts)-1]))
		if len(country) != 2 || len(continent) != 2 {
			return nil, fmt.Errorf("%s:%d: location %q lacks a 2-letter country and continent", name, line, get("location"))
		}
		l.Locations = append(l.Locations, Location{country, continent})
	}
	if len(l.Locations) == 0 {
		return nil, fmt.Errorf("%s: no offers", name)
	}
	for model, ps := range per {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		mid := len(ps) / 2
		if len(ps)%2 == 1 {
			l.PerGPU[model] = ps[mid]
		} else {
			l.PerGPU[model] = (ps[mid-1] + ps[mid]) / 2
		}
	}
	return l, nil
}
