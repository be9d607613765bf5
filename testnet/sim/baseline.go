package sim

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
)

// The central baselines: what the same supply and demand come to without
// a market. Each is an event-driven simulation over per-provider
// calendars (baseline_calendar.go) with zero latency and no messages.
//
// Shared rules, beyond the package's semantics (docs/SIM.md):
//   - A gold job books its reservation [max(Start, Submit), +Duration) on
//     a provider with the GPUs free of other reservations and silver runs
//     over the whole span, inside one window. Bronze in its way is
//     preempted in every baseline: the provider knows its reservations
//     and windows, so the notice is given Notice seconds before the GPUs
//     are needed and the bronze stops exactly then (a reservation booked
//     less than Notice ahead cuts the notice short). The notice is run
//     time: what ran after the last checkpoint is Lost.
//   - As the real provider does (auction/provider MinBackfill), a bronze
//     job is only started where it can run at least Notice+10 s before its
//     preemption, unless it would finish (or reach the horizon) first.
//   - Silver starts only on GPUs free now (bronze is not preempted for
//     it) whose work fits before the window ends and before any
//     reservation; it is never preempted.
//   - A run cut by the horizon keeps all its progress up to the horizon:
//     it was not preempted, the simulation just stops looking.
//   - A bronze job preempted after it started no longer runs out of
//     patience: it waits (retrying, or queued) until the horizon.

// BaselineOptions tune the baselines; zero fields take the defaults.
type BaselineOptions struct {
	Seed          uint64
	Horizon       int64 // seconds; required
	Retry         int64 // seconds between retries of a waiting job for the non-queueing baselines; default 300
	Patience      int64 // seconds a job waits for its first start; default 21600
	CheckpointSec int64 // bronze checkpoint period in seconds of running; default 600
	Notice        int64 // bronze preemption notice in seconds; default 30
	HubFeeBP      int64 // a central hub's fee on top of the floor, basis points; default 0
}

// minBackfill mirrors auction/provider.MinBackfill in seconds.
const minBackfill = 10

// goldGrace is how late a reservation may start and still be honoured.
const goldGrace = 60

func (o BaselineOptions) withDefaults() BaselineOptions {
	if o.Retry <= 0 {
		o.Retry = 300
	}
	if o.Patience <= 0 {
		o.Patience = 21600
	}
	if o.CheckpointSec <= 0 {
		o.CheckpointSec = 600
	}
	if o.Notice <= 0 {
		o.Notice = 30
	}
	return o
}

// The baselines' names.
const (
	BaselineRandom        = "random"
	BaselineFirstFit      = "first-fit"
	BaselineCheapest      = "greedy-cheapest"
	BaselineCentralOnline = "central-online"
)

// BaselineNames lists the baselines RunBaseline knows, in report order.
func BaselineNames() []string {
	return []string{BaselineRandom, BaselineFirstFit, BaselineCheapest, BaselineCentralOnline}
}

// RunBaseline matches s and d with the named central baseline.
func RunBaseline(name string, s *Supply, d *Demand, opt BaselineOptions) (Strategy, error) {
	known := false
	for _, n := range BaselineNames() {
		known = known || n == name
	}
	if !known {
		return Strategy{}, fmt.Errorf("unknown baseline %q (want one of %s)", name, strings.Join(BaselineNames(), ", "))
	}
	if opt.Horizon <= 0 {
		return Strategy{}, fmt.Errorf("baseline %s: horizon must be positive, got %d", name, opt.Horizon)
	}
	if err := d.checkGangs(); err != nil {
		return Strategy{}, fmt.Errorf("baseline %s: %w", name, err)
	}
	if opt.HubFeeBP < 0 {
		return Strategy{}, fmt.Errorf("baseline %s: negative hub fee %d bp", name, opt.HubFeeBP)
	}
	b := newBaselineSim(name, s, d, opt.withDefaults())
	b.run()
	return Strategy{Name: name, Outcomes: b.out}, nil
}

// ProviderServes reports whether job j may run on provider p at all:
// enough GPUs, an acceptable model, a matching region and a floor for
// its tier that is offered and within its MaxPrice.
func ProviderServes(p *Provider, j *Job) bool {
	if p.GPUs < j.GPUs || j.GPUs <= 0 {
		return false
	}
	if len(j.Models) > 0 {
		ok := false
		for _, m := range j.Models {
			ok = ok || m == p.Model
		}
		if !ok {
			return false
		}
	}
	if !regionServes(p, j.Region) {
		return false
	}
	f := TierFloor(p.Floors, j.Tier)
	return f > 0 && f <= j.MaxPrice
}

// regionServes: "" is anywhere, lower case a continent, upper case a country.
func regionServes(p *Provider, region string) bool {
	switch {
	case region == "":
		return true
	case region == strings.ToLower(region):
		return region == p.Continent
	default:
		return region == p.Country
	}
}

// TierFloor is the floor per GPU-hour of tier t in prices; 0 if not offered.
func TierFloor(prices auction.Prices, t auction.Tier) auction.Credits {
	switch t {
	case auction.Gold:
		return prices.Gold
	case auction.Silver:
		return prices.Silver
	case auction.Bronze:
		return prices.Bronze
	}
	return 0
}

// hubCharge is the per-GPU-hour price a run pays through a hub charging
// feeBP on top of floor, and what gpuSeconds of it cost, rounded once
// (to the nearest millionth) in 128-bit arithmetic so that no trace can
// overflow it.
func hubCharge(floor auction.Credits, feeBP, gpuSeconds int64) (price, paid auction.Credits) {
	num := uint64(floor) * uint64(10000+feeBP) // < 2^63 for any sane floor
	price = auction.Credits(num / 10000)
	const den = 10000 * 3600
	hi, lo := bits.Mul64(num, uint64(gpuSeconds))
	lo, carry := bits.Add64(lo, den/2, 0)
	hi += carry
	if hi >= den { // beyond int64 anyway: saturate rather than panic
		return price, auction.Credits(math.MaxInt64)
	}
	q, _ := bits.Div64(hi, lo, den)
	return price, auction.Credits(q)
}
