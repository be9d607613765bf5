package sim

import (
	"slices"

	"github.com/gleaner-net/gleaner/auction"
)

// maxSeriesPoints caps every curve, so that plots stay small however long
// the horizon or however many jobs and providers.
const maxSeriesPoints = 400

// SeriesPoint is one point of a curve.
type SeriesPoint struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// SeriesCurve is one line of a plot: a strategy's, or one tier's of it.
type SeriesCurve struct {
	Strategy string        `json:"strategy"`
	Tier     string        `json:"tier,omitempty"`
	Points   []SeriesPoint `json:"points"`
}

// Series is what the report's plots draw, computed from the runs.
type Series struct {
	// StepSec is the utilisation's resolution: an hour, or whole hours
	// enough that the horizon takes at most maxSeriesPoints steps.
	StepSec int64 `json:"step_sec"`
	// Utilisation per strategy: X the step's start in days, Y GPUs in use
	// over GPUs inside an open window, averaged over the step.
	Utilisation []SeriesCurve `json:"utilisation"`
	// Income per strategy: providers ranked by income per offered GPU-hour,
	// highest first; X the rank as a share of providers, Y credits.
	Income []SeriesCurve `json:"income"`
	// JCT per strategy: empirical CDF of completed jobs' completion
	// times; X hours, Y share of completed jobs.
	JCT []SeriesCurve `json:"jct"`
	// JCTAll per strategy: the same over every job submitted before the
	// horizon, a job that did not complete counted as finishing at the
	// horizon (censored), so that completing fewer jobs does not look
	// faster.
	JCTAll []SeriesCurve `json:"jct_all"`
	// PriceShare per strategy and tier ("all" first): empirical CDF over
	// jobs with useful work of paid / on-demand cost of that work.
	PriceShare []SeriesCurve `json:"price_share"`
}

// ComputeSeries computes the plots' data for every strategy, in order.
func ComputeSeries(s *Supply, d *Demand, strategies []Strategy, horizon int64) Series {
	out := Series{StepSec: seriesStep(horizon)}
	offered := offeredSeconds(s, horizon)
	open := newBuckets(horizon, out.StepSec)
	for _, p := range s.Providers {
		for _, w := range p.Windows {
			open.add(w.Start, w.End, int64(p.GPUs))
		}
	}
	openTotals := open.totals()
	for _, st := range strategies {
		used := newBuckets(horizon, out.StepSec)
		income := make([]auction.Credits, len(s.Providers))
		var jcts, jctsAll []float64
		shares := make([][]float64, len(reportTiers))
		for _, o := range st.Outcomes {
			var paid, onDemand auction.Credits
			for _, r := range o.Runs {
				used.add(r.Start, r.End, int64(r.GPUs))
				paid += r.Paid
				onDemand += runOnDemandCost(s, r)
				if r.Provider >= 0 && r.Provider < len(income) {
					income[r.Provider] += r.Paid
				}
			}
			if o.Job < 0 || o.Job >= len(d.Jobs) {
				continue
			}
			job := &d.Jobs[o.Job]
			if o.Completed {
				jcts = append(jcts, float64(o.Finished-job.Submit)/3600)
				jctsAll = append(jctsAll, float64(o.Finished-job.Submit)/3600)
			} else if job.Submit < horizon {
				jctsAll = append(jctsAll, float64(horizon-job.Submit)/3600)
			}
			if onDemand > 0 {
				share := float64(paid) / float64(onDemand)
				shares[0] = append(shares[0], share)
				if slot := tierSlot(job.Tier); slot > 0 {
					shares[slot] = append(shares[slot], share)
				}
			}
		}
		util := SeriesCurve{Strategy: st.Name}
		for i, u := range used.totals() {
			day := float64(int64(i)*out.StepSec) / 86400
			util.Points = append(util.Points, SeriesPoint{day, shareOf(float64(u), float64(openTotals[i]))})
		}
		out.Utilisation = append(out.Utilisation, util)
		rates := providerIncomeRates(income, offered)
		slices.Sort(rates)
		slices.Reverse(rates)
		out.Income = append(out.Income, SeriesCurve{Strategy: st.Name, Points: rankCurve(rates)})
		out.JCT = append(out.JCT, SeriesCurve{Strategy: st.Name, Points: cdfCurve(jcts)})
		out.JCTAll = append(out.JCTAll, SeriesCurve{Strategy: st.Name, Points: cdfCurve(jctsAll)})
		for i, tier := range reportTiers {
			out.PriceShare = append(out.PriceShare, SeriesCurve{Strategy: st.Name, Tier: tier, Points: cdfCurve(shares[i])})
		}
	}
	return out
}

// seriesStep is an hour, or the fewest whole hours that keep the
// horizon within maxSeriesPoints steps.
func seriesStep(horizon int64) int64 {
	hours := (horizon + 3599) / 3600
	return max(1, (hours+maxSeriesPoints-1)/maxSeriesPoints) * 3600
}

// cdfCurve is the empirical CDF of values: point (v, k/n) for the k-th
// smallest, thinned to maxSeriesPoints evenly spaced ranks.
func cdfCurve(values []float64) []SeriesPoint {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	n := len(sorted)
	var pts []SeriesPoint
	for _, rank := range thinnedRanks(n) {
		pts = append(pts, SeriesPoint{sorted[rank-1], float64(rank) / float64(n)})
	}
	return pts
}

// rankCurve plots values already in rank order against rank / n.
func rankCurve(ranked []float64) []SeriesPoint {
	n := len(ranked)
	var pts []SeriesPoint
	for _, rank := range thinnedRanks(n) {
		pts = append(pts, SeriesPoint{float64(rank) / float64(n), ranked[rank-1]})
	}
	return pts
}

// thinnedRanks is 1..n, or ceil(k*n/K) for k = 1..K when n is over
// K = maxSeriesPoints: always ending at n, so a CDF reaches 1.
func thinnedRanks(n int) []int {
	k := min(n, maxSeriesPoints)
	ranks := make([]int, 0, k)
	for i := 1; i <= k; i++ {
		ranks = append(ranks, (i*n+k-1)/k)
	}
	return ranks
}

// buckets sums weighted intervals into fixed steps of [0, horizon) in
// time linear in intervals plus steps: partial steps at an interval's
// ends are added directly, whole steps between them through a
// difference array.
type buckets struct {
	step, horizon int64
	direct, diff  []int64
}

func newBuckets(horizon, step int64) *buckets {
	n := int((max(horizon, 0) + step - 1) / step)
	return &buckets{step: step, horizon: horizon, direct: make([]int64, n), diff: make([]int64, n+1)}
}

// add adds weight w for every second of [a, b) inside the horizon.
func (b *buckets) add(a, end int64, w int64) {
	a, end = max(a, 0), min(end, b.horizon)
	if end <= a {
		return
	}
	first, last := a/b.step, (end-1)/b.step
	if first == last {
		b.direct[first] += w * (end - a)
		return
	}
	b.direct[first] += w * ((first+1)*b.step - a)
	b.direct[last] += w * (end - last*b.step)
	b.diff[first+1] += w * b.step
	b.diff[last] -= w * b.step
}

// totals is each step's weighted seconds.
func (b *buckets) totals() []int64 {
	out := make([]int64, len(b.direct))
	var run int64
	for i := range out {
		run += b.diff[i]
		out[i] = b.direct[i] + run
	}
	return out
}

// AdversaryRow is how one behaviour fared under one strategy: for
// providers, their income beside honest providers' day by day; for
// renters, what their jobs got and paid.
type AdversaryRow struct {
	Side      string `json:"side"`      // "provider" or "renter"
	Behaviour string `json:"behaviour"` // "honest" for the zero Behaviour
	// Providers only. Income per offered GPU-hour is in credits, the mean
	// over this behaviour's providers that offered any.
	Providers               int     `json:"providers,omitempty"`
	IncomePerOfferedGPUHour float64 `json:"income_per_offered_gpu_hour"`
	// Per simulated day 0..N-1, a run's payment spread over its seconds.
	DailyIncomePerProvider       []float64 `json:"daily_income_per_provider,omitempty"`
	DailyIncomePerOfferedGPUHour []float64 `json:"daily_income_per_offered_gpu_hour,omitempty"`
	// FirstDayBelowHonest is the first day this behaviour's income per
	// offered GPU-hour was below honest providers'; BehindFromDay the
	// first day from which it never again beat them (equal at zero
	// counts as behind). -1 if never, and for honest providers.
	FirstDayBelowHonest int `json:"first_day_below_honest"`
	BehindFromDay       int `json:"behind_from_day"`
	// Renters only.
	Jobs                 int     `json:"jobs,omitempty"`
	CompletedShare       float64 `json:"completed_share"`
	PaidPerUsefulGPUHour float64 `json:"paid_per_useful_gpu_hour"`
}

// behaviourOrder lists behaviours honest first, then the known
// adversaries, then any other alphabetically.
var behaviourOrder = []Behaviour{Honest, Skip, Fake, Abandon, Refuse, NonPayer}

func behaviourName(b Behaviour) string {
	if b == Honest {
		return "honest"
	}
	return string(b)
}

// orderedBehaviours is honest and every behaviour seen, in behaviourOrder.
func orderedBehaviours(seen map[Behaviour]bool) []Behaviour {
	out := []Behaviour{Honest}
	for _, b := range behaviourOrder[1:] {
		if seen[b] {
			out = append(out, b)
		}
	}
	var rest []Behaviour
	for b := range seen {
		if !slices.Contains(behaviourOrder, b) {
			rest = append(rest, b)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// AdversaryTable is one row per provider behaviour, then one per renter
// behaviour, each list honest first.
func AdversaryTable(s *Supply, d *Demand, st Strategy, horizon int64) []AdversaryRow {
	days := int((max(horizon, 0) + 86399) / 86400)
	seen := map[Behaviour]bool{}
	for _, p := range s.Providers {
		seen[p.Behaviour] = true
	}
	daily := make([]float64, len(s.Providers)*days) // credits, provider-major
	income := make([]auction.Credits, len(s.Providers))
	for _, o := range st.Outcomes {
		for _, r := range o.Runs {
			if r.Provider < 0 || r.Provider >= len(s.Providers) || days == 0 {
				continue
			}
			income[r.Provider] += r.Paid
			spreadOverDays(daily[r.Provider*days:(r.Provider+1)*days], r)
		}
	}
	offered := offeredSeconds(s, horizon)
	var rows []AdversaryRow
	for _, b := range orderedBehaviours(seen) {
		row := AdversaryRow{Side: "provider", Behaviour: behaviourName(b)}
		paid := make([]float64, days)
		offeredDaily := make([]int64, days)
		var rates []float64
		for i, p := range s.Providers {
			if p.Behaviour != b {
				continue
			}
			row.Providers++
			if offered[i] > 0 {
				rates = append(rates, creditsFloat(income[i])/gpuHours(offered[i]))
			}
			for day := range days {
				paid[day] += daily[i*days+day]
				for _, w := range p.Windows {
					offeredDaily[day] += overlapLen(w.Start, w.End, int64(day)*86400, min(int64(day+1)*86400, horizon)) * int64(p.GPUs)
				}
			}
		}
		row.IncomePerOfferedGPUHour = incomeSpread(rates).Mean
		for day := range days {
			row.DailyIncomePerProvider = append(row.DailyIncomePerProvider, shareOf(paid[day], float64(row.Providers)))
			row.DailyIncomePerOfferedGPUHour = append(row.DailyIncomePerOfferedGPUHour, shareOf(paid[day], gpuHours(offeredDaily[day])))
		}
		row.FirstDayBelowHonest, row.BehindFromDay = -1, -1
		if b != Honest {
			row.FirstDayBelowHonest, row.BehindFromDay = daysBehind(row.DailyIncomePerOfferedGPUHour, rows[0].DailyIncomePerOfferedGPUHour)
		}
		rows = append(rows, row)
	}
	return append(rows, renterRows(d, st)...)
}

// spreadOverDays adds a run's payment, in credits, to the days it ran in
// proportion to its seconds in each; an instant run pays on its day.
func spreadOverDays(daily []float64, r Run) {
	last := len(daily) - 1
	if r.End <= r.Start {
		daily[min(max(int(r.Start/86400), 0), last)] += creditsFloat(r.Paid)
		return
	}
	for day := max(int(r.Start/86400), 0); day <= min(int((r.End-1)/86400), last); day++ {
		secs := overlapLen(r.Start, r.End, int64(day)*86400, int64(day+1)*86400)
		daily[day] += creditsFloat(r.Paid) * float64(secs) / float64(r.End-r.Start)
	}
}

// daysBehind is the first day cheat is below honest, and the first day
// from which it is never above (below, or both zero), -1 for never.
func daysBehind(cheat, honest []float64) (firstBelow, behindFrom int) {
	firstBelow, behindFrom = -1, -1
	for day := range cheat {
		if cheat[day] < honest[day] && firstBelow < 0 {
			firstBelow = day
		}
		behind := cheat[day] < honest[day] || cheat[day] == 0
		switch {
		case !behind:
			behindFrom = -1
		case behindFrom < 0:
			behindFrom = day
		}
	}
	return firstBelow, behindFrom
}

// renterRows is one row per renter behaviour, honest first.
func renterRows(d *Demand, st Strategy) []AdversaryRow {
	of := func(renter int) Behaviour {
		if renter >= 0 && renter < len(d.Renters) {
			return d.Renters[renter]
		}
		return Honest
	}
	seen := map[Behaviour]bool{}
	for _, j := range d.Jobs {
		seen[of(j.Renter)] = true
	}
	var rows []AdversaryRow
	for _, b := range orderedBehaviours(seen) {
		var jobs, completed int
		var paid auction.Credits
		var useful int64
		for _, o := range st.Outcomes {
			if o.Job < 0 || o.Job >= len(d.Jobs) || of(d.Jobs[o.Job].Renter) != b {
				continue
			}
			jobs++
			if o.Completed {
				completed++
			}
			useful += o.Done
			for _, r := range o.Runs {
				paid += r.Paid
			}
		}
		rows = append(rows, AdversaryRow{
			Side: "renter", Behaviour: behaviourName(b), Jobs: jobs,
			FirstDayBelowHonest: -1, BehindFromDay: -1,
			CompletedShare:       shareOf(float64(completed), float64(jobs)),
			PaidPerUsefulGPUHour: shareOf(creditsFloat(paid), gpuHours(useful)),
		})
	}
	return rows
}
