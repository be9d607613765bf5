package sim

import (
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// TestARunCutByTheHorizonKeepsAllItDid: the simulation's end is not a
// preemption. A job still running when the horizon comes keeps all of its
// progress, as the baselines and the bound count it (not just its last
// 10-minute checkpoint), and a bronze run whose window the supply clips
// at the horizon (the scheduler gives its notice before the window
// closes) is not counted preempted. Before, a one-hour run at 10,000
// providers lost 8.6% of its sold GPU-hours to "preemption" that was the
// horizon, and every run it cut dropped up to 10 minutes of work.
func TestARunCutByTheHorizonKeepsAllItDid(t *testing.T) {
	const horizon = 3600
	od := auction.Credits(400_000)
	provider := func(id string, window int64) Provider {
		return Provider{ID: id, Model: "RTX4090", VRAMMiB: 24576, GPUs: 1, Country: "DE", Continent: "eu",
			Floors:  auction.Prices{Gold: od * 7 / 10, Silver: od * 6 / 10, Bronze: od * 3 / 10},
			Windows: []Span{{0, window}}}
	}
	for _, tc := range []struct {
		tier   auction.Tier
		window int64 // the window clipped at the horizon for bronze, as the supply draws it
	}{
		{auction.Bronze, horizon},
		{auction.Silver, 86400}, // silver must fit its window: a day
	} {
		t.Run(string(tc.tier), func(t *testing.T) {
			s := &Supply{OnDemand: map[string]auction.Credits{"RTX4090": od}, Providers: []Provider{provider("p000", tc.window)}}
			d := &Demand{Renters: []Behaviour{Honest}, Jobs: []Job{{ID: "long", Submit: 60, Duration: 4 * 3600, GPUs: 1,
				Models: []string{"RTX4090"}, Tier: tc.tier, Kind: "batch", MaxPrice: od}}}
			st, _, err := RunMarket(DefaultConfig(), s, d, horizon, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := st.Outcomes[0]
			if len(o.Runs) != 1 {
				t.Fatalf("want one run to the horizon, got %+v", o.Runs)
			}
			cutByTheHorizon(t, o.Runs[0], horizon)
			if o.Done != o.Runs[0].Useful {
				t.Fatalf("done %d, want the run's useful %d", o.Done, o.Runs[0].Useful)
			}
		})
	}
}

// TestAGangCutByTheHorizonKeepsAllItDid: the same for a bronze gang whose
// members' windows close with the horizon: no member's run is counted
// preempted, and each keeps its work to the horizon.
func TestAGangCutByTheHorizonKeepsAllItDid(t *testing.T) {
	s, d, h := gangWorld(3, 3, auction.Bronze, 1) // a 3 h gang, a 1 h horizon
	st, _, err := RunMarket(noJitter(), s, d, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := st.Outcomes[0]
	if len(o.Runs) != 3 {
		t.Fatalf("want one run per member to the horizon, got %+v", o.Runs)
	}
	for _, r := range o.Runs {
		cutByTheHorizon(t, r, h)
	}
}

// cutByTheHorizon fails t unless r ran to the horizon, is not counted
// preempted and kept all its work: run times are whole seconds and work
// is not, so a second per GPU is rounding (the last checkpoint alone
// would keep whole 10 minutes).
func cutByTheHorizon(t *testing.T, r Run, horizon int64) {
	t.Helper()
	ran := (r.End - r.Start) * int64(r.GPUs)
	switch {
	case r.Preempted:
		t.Fatalf("the run cut by the horizon is counted preempted: %+v", r)
	case r.End != horizon:
		t.Fatalf("the run ended at %d s, want the horizon (%d s): %+v", r.End, horizon, r)
	case r.Lost > int64(r.GPUs) || r.Useful < ran-int64(r.GPUs):
		t.Fatalf("ran %d GPU-s; useful %d, lost %d: want all of it useful (the last checkpoint keeps only %d)",
			ran, r.Useful, r.Lost, ran/600*600)
	}
}
