package sim

import (
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// blValid is a two-job instance and a correct outcome for it.
func blValid() (*Supply, *Demand, Strategy) {
	s, d := blWorld([]Provider{
		blProvider("p0", 2, blCredit, Span{0, 5000}),
		blProvider("p1", 1, blCredit, Span{1000, 3000}),
	}, blJob("j0", auction.Silver, 0, 1000, 2), blJob("j1", auction.Silver, 0, 500, 1))
	d.Jobs[0].Models = []string{"A100"}
	st := Strategy{Name: "hand", Outcomes: []Outcome{
		{Job: 0, Completed: true, Done: 2000, Finished: 1000, Runs: []Run{{Provider: 0, GPUs: 2, Start: 0, End: 1000, Useful: 2000}}},
		{Job: 1, Completed: true, Done: 500, Finished: 1500, Runs: []Run{{Provider: 0, GPUs: 1, Start: 1000, End: 1500, Useful: 500}}},
	}}
	return s, d, st
}

func TestConservationCatchesBrokenOutputs(t *testing.T) {
	s, d, ok := blValid()
	if err := CheckConservation(s, d, ok, 5000); err != nil {
		t.Fatalf("valid outcome rejected: %v", err)
	}
	cases := []struct {
		name, want string
		brk        func(st *Strategy, s *Supply)
	}{
		{"double-booked GPU", "t=900", func(st *Strategy, _ *Supply) {
			st.Outcomes[1].Runs[0].Start, st.Outcomes[1].Runs[0].End = 900, 1400
		}},
		{"outside a window", "not inside one window", func(st *Strategy, _ *Supply) {
			st.Outcomes[1].Runs[0].Provider = 1
			st.Outcomes[1].Runs[0].Start, st.Outcomes[1].Runs[0].End = 2800, 3300
		}},
		{"infeasible provider", "does not serve", func(_ *Strategy, s *Supply) { s.Providers[0].Model = "H100" }},
		{"over the floor", "does not serve", func(_ *Strategy, s *Supply) { s.Providers[0].Floors.Silver = 20 * blCredit }},
		{"done mismatch", "sum of its runs", func(st *Strategy, _ *Supply) { st.Outcomes[0].Done = 1999 }},
		{"useful+lost", "useful", func(st *Strategy, _ *Supply) { st.Outcomes[1].Runs[0].Useful = 400 }},
		{"past the horizon", "outside [0, 5000]", func(st *Strategy, _ *Supply) {
			st.Outcomes[1].Runs[0].End = 5100
			st.Outcomes[1].Runs[0].Useful = 4100
		}},
	}
	for _, c := range cases {
		s, d, st := blValid()
		c.brk(&st, s)
		err := CheckConservation(s, d, st, 5000)
		perRun := c.name != "done mismatch" // a job's total names no provider
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "hand: job j") ||
			perRun && !strings.Contains(err.Error(), "provider p") {
			t.Errorf("%s: got %v, want an error naming the job, provider and %q", c.name, err, c.want)
		}
	}
}

// BenchmarkCheckConservation checks a million runs on 10,000 providers.
func BenchmarkCheckConservation(b *testing.B) {
	const provs, perJob = 10000, 10
	s := &Supply{}
	for range provs {
		s.Providers = append(s.Providers, blProvider("p", 8, blCredit, Span{0, 1 << 40}))
	}
	d := &Demand{}
	st := Strategy{Name: "bench"}
	for j := range 100000 {
		d.Jobs = append(d.Jobs, blJob("j", auction.Bronze, 0, 1000*perJob, 1))
		o := Outcome{Job: j, Done: 1000 * perJob, Completed: true}
		for k := range perJob {
			at := int64(j/provs*perJob+k) * 1000
			o.Runs = append(o.Runs, Run{Provider: j % provs, GPUs: 1, Start: at, End: at + 1000, Useful: 1000})
		}
		st.Outcomes = append(st.Outcomes, o)
	}
	for b.Loop() {
		if err := CheckConservation(s, d, st, 1<<40); err != nil {
			b.Fatal(err)
		}
	}
}
