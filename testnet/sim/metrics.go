package sim

import (
	"slices"

	"github.com/gleaner-net/gleaner/auction"
)

// Metrics is how one strategy did on one supply and demand. GPU-hours are
// float hours; money is auction.Credits (millionths of a credit, 1 credit
// taken as 1 USD); shares are fractions in [0, 1] (0 where the
// denominator is 0, so that the JSON never holds NaN). Percentiles are
// nearest-rank: the p-th percentile of n sorted values is the value at
// 1-based rank ceil(p*n/100), so it is always one of the values seen.
type Metrics struct {
	// Supply offered inside [0, horizon): GPUs times window length.
	OfferedGPUHours float64 `json:"offered_gpu_hours"`
	// Sold is every run's (End-Start)*GPUs, useful or not.
	SoldGPUHours float64 `json:"sold_gpu_hours"`
	// Useful is the jobs' progress, the sum of Outcome.Done.
	UsefulGPUHours     float64 `json:"useful_gpu_hours"`
	FilledShare        float64 `json:"filled_share"` // sold / offered
	BoundGPUHours      float64 `json:"bound_gpu_hours"`
	UsefulShareOfBound float64 `json:"useful_share_of_bound"`
	// Tiers is the job-side metrics for "all", "gold", "silver", "bronze".
	Tiers  []TierMetrics `json:"tiers"`
	Gold   GoldMetrics   `json:"gold"`
	Income IncomeMetrics `json:"provider_income"`
	// Traffic per job and gossip per node (providers + renters) per
	// second of simulated time.
	MessagesPerJob           float64 `json:"messages_per_job"`
	BytesPerJob              float64 `json:"bytes_per_job"`
	GossipBytesPerNodePerSec float64 `json:"gossip_bytes_per_node_per_sec"`
	// Gangs is the demand's gangs' figures; absent without gangs.
	Gangs *GangMetrics `json:"gangs,omitempty"`
	// Arrays is the demand's job arrays' figures; absent without arrays.
	Arrays *ArrayMetrics `json:"arrays,omitempty"`
}

// TierMetrics is the renters' side of Metrics for one tier or "all".
type TierMetrics struct {
	Tier             string  `json:"tier"`
	Jobs             int     `json:"jobs"`
	Completed        int     `json:"completed"`
	CompletionShare  float64 `json:"completion_share"`
	DemandedGPUHours float64 `json:"demanded_gpu_hours"`
	SoldGPUHours     float64 `json:"sold_gpu_hours"`
	UsefulGPUHours   float64 `json:"useful_gpu_hours"`
	// Paid is what renters paid; OnDemand what the same useful GPU-hours
	// cost at the on-demand price of the model they ran on.
	Paid      auction.Credits `json:"paid"`
	OnDemand  auction.Credits `json:"on_demand_cost"`
	CostShare float64         `json:"cost_share"` // paid / on-demand
	// Lost on preempted runs (past their last checkpoint), and its share
	// of the tier's sold GPU-hours.
	PreemptionLostGPUHours float64 `json:"preemption_lost_gpu_hours"`
	PreemptionLostShare    float64 `json:"preemption_lost_share"`
	// Over completed jobs: wait is the first run's start minus Submit
	// (gold: minus the reserved Start); JCT is Finished minus Submit.
	WaitP50Sec int64 `json:"wait_p50_sec"`
	WaitP95Sec int64 `json:"wait_p95_sec"`
	JCTP50Sec  int64 `json:"jct_p50_sec"`
	JCTP95Sec  int64 `json:"jct_p95_sec"`
	// JCTMeanSec is the mean JCT of completed jobs, rounded to the second.
	JCTMeanSec int64 `json:"jct_mean_sec"`
	// Over every job submitted before the horizon, a job that did not
	// complete (still running, still waiting, given up or failed) counted
	// as finishing at the horizon: a censored JCT, a lower bound on what
	// it would have been. Completed-only figures flatter a strategy that
	// completes fewer jobs; these do not. Censored is how many jobs were
	// counted at the horizon.
	Censored      int   `json:"censored"`
	JCTAllP50Sec  int64 `json:"jct_all_p50_sec"`
	JCTAllP95Sec  int64 `json:"jct_all_p95_sec"`
	JCTAllMeanSec int64 `json:"jct_all_mean_sec"`
	// Preempted runs, and of them how many the job ran again after
	// (Returned): from a preempted run's end to the job's next run's
	// start, p50 and p95 over those.
	PreemptedRuns int   `json:"preempted_runs"`
	Returned      int   `json:"returned"`
	ReturnP50Sec  int64 `json:"return_p50_sec"`
	ReturnP95Sec  int64 `json:"return_p95_sec"`
}

// GoldMetrics is how reservations fared. A reservation is made when the
// job ran at all or was honoured.
type GoldMetrics struct {
	Demanded           int     `json:"demanded"`
	Made               int     `json:"made"`
	Honoured           int     `json:"honoured"`
	HonouredShare      float64 `json:"honoured_share"`       // of made
	HonouredOfDemanded float64 `json:"honoured_of_demanded"` // of demanded
}

// IncomeMetrics is the spread of providers' income per offered GPU-hour
// (credits, float), over providers that offered any.
type IncomeMetrics struct {
	Providers int     `json:"providers"`
	Mean      float64 `json:"mean"`
	P10       float64 `json:"p10"`
	P50       float64 `json:"p50"`
	P90       float64 `json:"p90"`
	Gini      float64 `json:"gini"`
}

// reportTiers is the order of Metrics.Tiers; index 0 is every job.
var reportTiers = []string{"all", string(auction.Gold), string(auction.Silver), string(auction.Bronze)}

// tierSlot is where a job's tier sits in reportTiers (0 if unknown).
func tierSlot(t auction.Tier) int {
	switch t {
	case auction.Gold:
		return 1
	case auction.Silver:
		return 2
	case auction.Bronze:
		return 3
	}
	return 0
}

// tierTally accumulates one tier's job-side figures in exact integers.
type tierTally struct {
	jobs, completed              int
	demanded, sold, useful, lost int64 // GPU-seconds
	paid, onDemand               auction.Credits
	waits, jcts                  []int64
	jctsAll                      []int64 // completed, and the others censored at the horizon
	censored                     int
	preempted                    int
	returns                      []int64 // seconds from a preempted run's end to the next run's start
}

// ComputeMetrics measures strategy st on supply s and demand d over
// [0, horizon), beside the bound's GPU-seconds.
func ComputeMetrics(s *Supply, d *Demand, st Strategy, horizon int64, boundGPUSeconds int64) Metrics {
	offered := offeredSeconds(s, horizon)
	var totalOffered int64
	for _, o := range offered {
		totalOffered += o
	}
	income := make([]auction.Credits, len(s.Providers))
	tallies := make([]tierTally, len(reportTiers))
	var gold GoldMetrics
	for _, o := range st.Outcomes {
		if o.Job < 0 || o.Job >= len(d.Jobs) {
			continue
		}
		job := &d.Jobs[o.Job]
		slot := tierSlot(job.Tier)
		if slot == 1 {
			gold.Demanded++
			if len(o.Runs) > 0 || o.Honoured {
				gold.Made++
			}
			if o.Honoured {
				gold.Honoured++
			}
		}
		var sold, lost int64
		var paid, onDemand auction.Credits
		for _, r := range o.Runs {
			sold += (r.End - r.Start) * int64(r.GPUs)
			if r.Preempted {
				lost += r.Lost
			}
			paid += r.Paid
			onDemand += runOnDemandCost(s, r)
			if r.Provider >= 0 && r.Provider < len(income) {
				income[r.Provider] += r.Paid
			}
		}
		f := jobFigures{job: job, o: &o, sold: sold, lost: lost, paid: paid, onDemand: onDemand, horizon: horizon}
		tallies[0].add(f)
		if slot > 0 {
			tallies[slot].add(f)
		}
	}
	all := &tallies[0]
	m := Metrics{
		OfferedGPUHours:    gpuHours(totalOffered),
		SoldGPUHours:       gpuHours(all.sold),
		UsefulGPUHours:     gpuHours(all.useful),
		FilledShare:        shareOf(float64(all.sold), float64(totalOffered)),
		BoundGPUHours:      gpuHours(boundGPUSeconds),
		UsefulShareOfBound: shareOf(float64(all.useful), float64(boundGPUSeconds)),
		Income:             incomeSpread(providerIncomeRates(income, offered)),
	}
	for i := range tallies {
		m.Tiers = append(m.Tiers, tallies[i].metrics(reportTiers[i]))
	}
	gold.HonouredShare = shareOf(float64(gold.Honoured), float64(gold.Made))
	gold.HonouredOfDemanded = shareOf(float64(gold.Honoured), float64(gold.Demanded))
	m.Gold = gold
	m.MessagesPerJob = shareOf(float64(st.Messages.Messages), float64(len(d.Jobs)))
	m.BytesPerJob = shareOf(float64(st.Messages.Bytes), float64(len(d.Jobs)))
	nodes := len(s.Providers) + renterCount(d)
	m.GossipBytesPerNodePerSec = shareOf(float64(st.Messages.GossipBytes), float64(nodes)*float64(horizon))
	m.Gangs = gangMetrics(d, st)
	m.Arrays = arrayMetrics(d, st)
	return m
}

// jobFigures is one job's outcome summed over its runs.
type jobFigures struct {
	job            *Job
	o              *Outcome
	sold, lost     int64 // GPU-seconds
	paid, onDemand auction.Credits
	horizon        int64
}

func (t *tierTally) add(f jobFigures) {
	t.jobs++
	t.demanded += f.job.Work()
	t.sold += f.sold
	t.useful += f.o.Done
	t.lost += f.lost
	t.paid += f.paid
	t.onDemand += f.onDemand
	for i, r := range f.o.Runs {
		if !r.Preempted {
			continue
		}
		t.preempted++
		// The job's next run: the next one for a job, the first that
		// starts after this one ended for a gang (its siblings' runs
		// overlap it).
		for _, n := range f.o.Runs[i+1:] {
			if !f.job.Gang() || n.Start >= r.End {
				t.returns = append(t.returns, n.Start-r.End)
				break
			}
		}
	}
	if f.o.Completed {
		t.completed++
		t.jcts = append(t.jcts, f.o.Finished-f.job.Submit)
		t.jctsAll = append(t.jctsAll, f.o.Finished-f.job.Submit)
		if len(f.o.Runs) > 0 {
			t.waits = append(t.waits, firstStart(f.o.Runs)-waitFrom(f.job))
		}
	} else if f.job.Submit < f.horizon {
		t.censored++
		t.jctsAll = append(t.jctsAll, f.horizon-f.job.Submit)
	}
}

func (t *tierTally) metrics(name string) TierMetrics {
	slices.Sort(t.waits)
	slices.Sort(t.jcts)
	slices.Sort(t.jctsAll)
	slices.Sort(t.returns)
	return TierMetrics{
		PreemptedRuns:          t.preempted,
		Returned:               len(t.returns),
		ReturnP50Sec:           nearestRank(t.returns, 50),
		ReturnP95Sec:           nearestRank(t.returns, 95),
		Tier:                   name,
		Jobs:                   t.jobs,
		Completed:              t.completed,
		CompletionShare:        shareOf(float64(t.completed), float64(t.jobs)),
		DemandedGPUHours:       gpuHours(t.demanded),
		SoldGPUHours:           gpuHours(t.sold),
		UsefulGPUHours:         gpuHours(t.useful),
		Paid:                   t.paid,
		OnDemand:               t.onDemand,
		CostShare:              shareOf(float64(t.paid), float64(t.onDemand)),
		PreemptionLostGPUHours: gpuHours(t.lost),
		PreemptionLostShare:    shareOf(float64(t.lost), float64(t.sold)),
		WaitP50Sec:             nearestRank(t.waits, 50),
		WaitP95Sec:             nearestRank(t.waits, 95),
		JCTP50Sec:              nearestRank(t.jcts, 50),
		JCTP95Sec:              nearestRank(t.jcts, 95),
		JCTMeanSec:             meanSec(t.jcts),
		Censored:               t.censored,
		JCTAllP50Sec:           nearestRank(t.jctsAll, 50),
		JCTAllP95Sec:           nearestRank(t.jctsAll, 95),
		JCTAllMeanSec:          meanSec(t.jctsAll),
	}
}

// meanSec is the mean of whole seconds, rounded half up; 0 for none.
func meanSec(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	var sum int64
	for _, x := range v {
		sum += x
	}
	n := int64(len(v))
	return (2*sum + n) / (2 * n)
}

// firstStart is when the earliest of some runs started.
func firstStart(runs []Run) int64 {
	first := runs[0].Start
	for _, r := range runs[1:] {
		first = min(first, r.Start)
	}
	return first
}

// waitFrom is when a job's wait starts: a gold job waits for its
// reserved start, any other for nothing but its submission.
func waitFrom(j *Job) int64 {
	if j.Tier == auction.Gold && j.Start > 0 {
		return j.Start
	}
	return j.Submit
}

// runOnDemandCost is what a run's useful GPU-seconds would have cost at
// the on-demand price of its provider's model, rounded to the nearest
// millionth; 0 for an unknown provider or model.
func runOnDemandCost(s *Supply, r Run) auction.Credits {
	if r.Provider < 0 || r.Provider >= len(s.Providers) {
		return 0
	}
	price := s.OnDemand[s.Providers[r.Provider].Model]
	return auction.Credits((r.Useful*int64(price) + 1800) / 3600)
}

// offeredSeconds is each provider's GPU-seconds of windows inside
// [0, horizon).
func offeredSeconds(s *Supply, horizon int64) []int64 {
	out := make([]int64, len(s.Providers))
	for i, p := range s.Providers {
		for _, w := range p.Windows {
			out[i] += overlapLen(w.Start, w.End, 0, horizon) * int64(p.GPUs)
		}
	}
	return out
}

// providerIncomeRates is income per offered GPU-hour, in credits, of
// every provider that offered any.
func providerIncomeRates(income []auction.Credits, offered []int64) []float64 {
	var rates []float64
	for i, o := range offered {
		if o > 0 {
			rates = append(rates, creditsFloat(income[i])/gpuHours(o))
		}
	}
	return rates
}

func incomeSpread(rates []float64) IncomeMetrics {
	sorted := slices.Clone(rates)
	slices.Sort(sorted)
	var sum float64
	for _, r := range sorted {
		sum += r
	}
	return IncomeMetrics{
		Providers: len(sorted),
		Mean:      shareOf(sum, float64(len(sorted))),
		P10:       nearestRank(sorted, 10),
		P50:       nearestRank(sorted, 50),
		P90:       nearestRank(sorted, 90),
		Gini:      giniSorted(sorted),
	}
}

// renterCount is how many renters submit a job: the renter nodes a run
// has (one that submits nothing has no node).
func renterCount(d *Demand) int {
	seen := map[int]bool{}
	for _, j := range d.Jobs {
		seen[j.Renter] = true
	}
	return len(seen)
}

// nearestRank is the p-th percentile (p in whole percent) of ascending
// values by the nearest-rank method: rank ceil(p*n/100), at least 1.
// It is 0 for no values.
func nearestRank[T int64 | float64](sorted []T, p int) T {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := max((p*n+99)/100, 1)
	return sorted[min(rank, n)-1]
}

// giniSorted is the Gini coefficient of ascending non-negative values:
// sum over i (1-based) of (2i-n-1)*x_i, over n*sum(x). 0 means equal
// shares; (n-1)/n means one holds everything. 0 for no income at all.
func giniSorted(sorted []float64) float64 {
	n := float64(len(sorted))
	var num, sum float64
	for i, x := range sorted {
		num += (2*float64(i+1) - n - 1) * x
		sum += x
	}
	return shareOf(num, n*sum)
}

// shareOf is a/b, or 0 when b is 0, so that reports never hold NaN.
func shareOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func gpuHours(gpuSeconds int64) float64 { return float64(gpuSeconds) / 3600 }

func creditsFloat(c auction.Credits) float64 { return float64(c) / 1e6 }

// overlapLen is the length of [a, b) ∩ [lo, hi), 0 if they are disjoint.
func overlapLen(a, b, lo, hi int64) int64 {
	return max(0, min(b, hi)-max(a, lo))
}
