package sim

import (
	"fmt"
	"strings"
)

// MarketStrategy is the name of the decentralised market's strategy: the
// goals are its goals; baselines are shown beside it for comparison.
const MarketStrategy = "market"

// Goal statuses. A goal is "not tested" when the run held nothing it
// could be judged on (no gold reservation demanded, no cheating provider,
// no preemptible job, a baseline that sends no messages): such a goal is
// neither met nor missed, and Why says what was missing.
const (
	GoalMet       = "met"
	GoalMissed    = "missed"
	GoalNotTested = "not tested"
)

// Goal is one target and how a strategy did against it. Status is
// GoalMet, GoalMissed or GoalNotTested; Met is true only for GoalMet.
// Why is a plain sentence computed from the numbers: always when the goal
// was missed or not tested.
type Goal struct {
	Name     string  `json:"name"`
	Target   string  `json:"target"`
	Strategy string  `json:"strategy"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Status   string  `json:"status"`
	Met      bool    `json:"met"`
	Why      string  `json:"why,omitempty"`
}

// Tested reports whether the run held anything to judge the goal on.
func (g Goal) Tested() bool { return g.Status != GoalNotTested }

// goalVerdict is one goal measured on one strategy.
type goalVerdict struct {
	value  float64
	status string
	why    string // for a missed or untested goal
}

func verdict(value float64, met bool, why string) goalVerdict {
	if met {
		return goalVerdict{value, GoalMet, ""}
	}
	return goalVerdict{value, GoalMissed, why}
}

func untested(why string) goalVerdict { return goalVerdict{0, GoalNotTested, why} }

// goalCheck measures one goal on one strategy.
type goalCheck func(sr *StrategyReport) goalVerdict

// goalDef is one goal; better is +1 when a higher value is better, -1
// when lower, so that a missed goal can name the best other strategy.
type goalDef struct {
	name, target, unit string
	better             float64
	check              goalCheck
}

var goalDefs = []goalDef{
	{"useful-of-bound", ">= 90% of the bound's GPU-hours useful", "%", +1, checkUsefulOfBound},
	{"bronze-cost", "bronze pays <= 50% of on-demand", "%", -1, checkBronzeCost},
	{"gold-honoured", ">= 99.9% of gold reservations made honoured", "%", +1, checkGoldHonoured},
	{"preemption-loss", "preemption loses < 2% of sold GPU-hours", "%", -1, checkPreemptionLoss},
	{"cheaters-behind", "cheating providers earn less per offered GPU-hour than honest ones from day 1 on", "day", -1, checkCheatersBehind},
	{"gossip", "gossip <= 50 KB/s per node", "KB/s", -1, checkGossip},
}

// EvaluateGoals checks every goal for every strategy, the market first
// and then the others in their given order.
func EvaluateGoals(strategies []StrategyReport) []Goal {
	order := make([]*StrategyReport, 0, len(strategies))
	for i := range strategies {
		if strategies[i].Name == MarketStrategy {
			order = append(order, &strategies[i])
		}
	}
	for i := range strategies {
		if strategies[i].Name != MarketStrategy {
			order = append(order, &strategies[i])
		}
	}
	var goals []Goal
	for _, def := range goalDefs {
		for i, sr := range order {
			v := def.check(sr)
			if v.status == GoalMissed {
				v.why += bestOther(def, order, i)
			}
			goals = append(goals, Goal{
				Name: def.name, Target: def.target, Strategy: sr.Name,
				Value: v.value, Unit: def.unit, Status: v.status, Met: v.status == GoalMet, Why: v.why,
			})
		}
	}
	return goals
}

// bestOther is a sentence naming the strategy, other than order[self],
// that did best on the goal among those it tested, or "" if there is none.
func bestOther(def goalDef, order []*StrategyReport, self int) string {
	best, bestValue := -1, 0.0
	for i, sr := range order {
		if i == self {
			continue
		}
		v := def.check(sr)
		if v.status == GoalNotTested {
			continue
		}
		if best < 0 || v.value*def.better > bestValue*def.better {
			best, bestValue = i, v.value
		}
	}
	if best < 0 {
		return ""
	}
	return fmt.Sprintf(" The best other strategy, %s, reached %.1f %s.", order[best].Name, bestValue, def.unit)
}

func checkUsefulOfBound(sr *StrategyReport) goalVerdict {
	m := &sr.Metrics
	v := 100 * m.UsefulShareOfBound
	if m.BoundGPUHours == 0 {
		return untested("The bound is 0 GPU-hours: no schedule could have filled anything.")
	}
	worst := m.Tiers[1]
	for _, t := range m.Tiers[2:] {
		if t.Jobs > 0 && (worst.Jobs == 0 || t.CompletionShare < worst.CompletionShare) {
			worst = t
		}
	}
	why := fmt.Sprintf("%s made %.1f of the bound's %.1f GPU-hours useful (%.1f%%); the tier completing least was %s at %.1f%% of its jobs.",
		sr.Name, m.UsefulGPUHours, m.BoundGPUHours, v, worst.Tier, 100*worst.CompletionShare)
	return verdict(v, v >= 90, why)
}

func checkBronzeCost(sr *StrategyReport) goalVerdict {
	b := sr.Metrics.Tiers[3]
	v := 100 * b.CostShare
	switch {
	case b.Jobs == 0:
		return untested("There were no bronze jobs to price.")
	case b.OnDemand == 0:
		return verdict(v, false, fmt.Sprintf("None of the %d bronze jobs did useful work, so bronze saved renters nothing.", b.Jobs))
	}
	why := fmt.Sprintf("Bronze renters paid %.1f%% of the on-demand cost of their useful GPU-hours (gold %.1f%%, silver %.1f%%).",
		v, 100*sr.Metrics.Tiers[1].CostShare, 100*sr.Metrics.Tiers[2].CostShare)
	return verdict(v, v <= 50, why)
}

func checkGoldHonoured(sr *StrategyReport) goalVerdict {
	g := sr.Metrics.Gold
	v := 100 * g.HonouredShare
	switch {
	case g.Demanded == 0:
		return untested("There were no gold reservations to honour (0 demanded).")
	case g.Made == 0:
		return verdict(v, false, fmt.Sprintf("None of the %d gold reservations demanded was made.", g.Demanded))
	}
	why := fmt.Sprintf("%d of the %d gold reservations made were not honoured (%d demanded).",
		g.Made-g.Honoured, g.Made, g.Demanded)
	return verdict(v, v >= 99.9, why)
}

func checkPreemptionLoss(sr *StrategyReport) goalVerdict {
	m := &sr.Metrics
	v := 100 * m.Tiers[0].PreemptionLostShare
	switch {
	case m.Tiers[3].Jobs == 0:
		return untested("There were no bronze jobs, the only preemptible tier: nothing could be preempted.")
	case m.Tiers[3].SoldGPUHours == 0:
		return untested(fmt.Sprintf("None of the %d bronze jobs ran, so none could be preempted.", m.Tiers[3].Jobs))
	}
	worst := m.Tiers[1]
	for _, t := range m.Tiers[2:] {
		if t.PreemptionLostShare > worst.PreemptionLostShare {
			worst = t
		}
	}
	why := fmt.Sprintf("Preempted runs lost %.1f of %.1f sold GPU-hours (%.2f%%), most in %s (%.2f%% of its sold GPU-hours).",
		m.Tiers[0].PreemptionLostGPUHours, m.SoldGPUHours, v, worst.Tier, 100*worst.PreemptionLostShare)
	return verdict(v, v < 2, why)
}

// checkCheatersBehind's value is the latest day from which some cheating
// behaviour stayed behind honest providers; a behaviour that never fell
// behind for good counts as the number of days simulated.
func checkCheatersBehind(sr *StrategyReport) goalVerdict {
	worst, worstDay := "", -1
	var late []string
	for _, row := range sr.Adversaries {
		if row.Side != "provider" || row.Behaviour == "honest" || row.Providers == 0 {
			continue
		}
		day := row.BehindFromDay
		if day < 0 {
			day = len(row.DailyIncomePerOfferedGPUHour)
		}
		if row.BehindFromDay < 0 || day > 1 {
			late = append(late, describeLag(row))
		}
		if day > worstDay {
			worst, worstDay = row.Behaviour, day
		}
	}
	if worst == "" {
		return untested("There were no cheating providers in this run (--adversaries adds them).")
	}
	return verdict(float64(worstDay), len(late) == 0, strings.Join(late, " "))
}

func describeLag(row AdversaryRow) string {
	if row.BehindFromDay < 0 {
		return fmt.Sprintf("%s providers were not behind honest ones by the last day.", row.Behaviour)
	}
	return fmt.Sprintf("%s providers fell behind honest ones for good only on day %d.", row.Behaviour, row.BehindFromDay)
}

func checkGossip(sr *StrategyReport) goalVerdict {
	if sr.Traffic.Messages == 0 && sr.Traffic.GossipBytes == 0 {
		return untested(fmt.Sprintf("%s sent no messages: a central baseline has no gossip to measure.", sr.Name))
	}
	v := sr.Metrics.GossipBytesPerNodePerSec / 1000
	why := fmt.Sprintf("Each node gossiped %.1f KB/s on average (%d gossip bytes in all).", v, sr.Traffic.GossipBytes)
	return verdict(v, v <= 50, why)
}
