package sim

import "testing"

// JCT over completed jobs flatters a strategy that completes fewer: the
// mean, and the figures over all jobs with each unfinished one counted at
// the horizon (censored), sit beside them.
func TestJCTMeanAndCensored(t *testing.T) {
	s, d := rpSupply(), rpDemand()
	m := ComputeMetrics(s, d, rpStrategy("market"), rpHorizon, 72000)
	all, gold := m.Tiers[0], m.Tiers[1]
	// Completed: j0 94200 s, j1 3600 s, j2 7200 s. Unfinished: j3
	// (submitted at 0: 172800 s to the horizon) and j4 (at 100000: 72800 s).
	for _, c := range []struct {
		what      string
		got, want int64
	}{
		{"completed p50", all.JCTP50Sec, 7200},
		{"completed mean", all.JCTMeanSec, (94200 + 3600 + 7200) / 3},
		{"censored", int64(all.Censored), 2},
		{"all p50", all.JCTAllP50Sec, 72800},
		{"all p95", all.JCTAllP95Sec, 172800},
		{"all mean", all.JCTAllMeanSec, (94200 + 3600 + 7200 + 172800 + 72800) / 5},
		{"gold all mean", gold.JCTAllMeanSec, (7200 + 172800) / 2},
		{"gold censored", int64(gold.Censored), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
		}
	}

	// A strategy that completes only the quick job looks faster over
	// completed jobs, and is slower over all of them.
	lazy := rpStrategy("lazy")
	for i := range lazy.Outcomes {
		if i != 1 {
			lazy.Outcomes[i] = Outcome{Job: i, Reason: "no capacity"}
		}
	}
	l := ComputeMetrics(s, d, lazy, rpHorizon, 72000).Tiers[0]
	if l.JCTP50Sec >= all.JCTP50Sec || l.JCTMeanSec >= all.JCTMeanSec {
		t.Errorf("completed-only: lazy p50 %d mean %d, busy p50 %d mean %d; want lazy faster", l.JCTP50Sec, l.JCTMeanSec, all.JCTP50Sec, all.JCTMeanSec)
	}
	if l.JCTAllP50Sec <= all.JCTAllP50Sec || l.JCTAllMeanSec <= all.JCTAllMeanSec || l.Censored != 4 {
		t.Errorf("all jobs: lazy p50 %d mean %d (%d censored), busy p50 %d mean %d; want lazy slower",
			l.JCTAllP50Sec, l.JCTAllMeanSec, l.Censored, all.JCTAllP50Sec, all.JCTAllMeanSec)
	}
	series := ComputeSeries(s, d, []Strategy{lazy}, rpHorizon)
	if n := len(series.JCTAll[0].Points); n != 5 || series.JCTAll[0].Points[n-1].X != 172800.0/3600 {
		t.Errorf("the all-jobs JCT curve: %+v, want 5 points ending at the 48 h of j3", series.JCTAll[0].Points)
	}
}
