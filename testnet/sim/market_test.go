package sim

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// mkWorld is a small market: n providers of 1..4 GPUs of two models on
// two continents, open in two windows a day, and jobs of every tier.
func mkWorld(seed uint64, n, jobs int, days int64) (*Supply, *Demand, int64) {
	r := rand.New(rand.NewPCG(seed, 3))
	horizon := days * 86400
	s := &Supply{OnDemand: map[string]auction.Credits{"A100-80GB": 1_500_000, "RTX4090": 400_000}}
	models := []string{"A100-80GB", "RTX4090"}
	conts := [][2]string{{"DE", "eu"}, {"US", "na"}}
	for i := range n {
		m, c := models[i%2], conts[(i/2)%2]
		od := s.OnDemand[m]
		p := Provider{ID: fmt.Sprintf("p%03d", i), Model: m, VRAMMiB: 24576, GPUs: 1 + r.IntN(4), Country: c[0], Continent: c[1],
			Floors: auction.Prices{Gold: od * 7 / 10, Silver: od * 6 / 10, Bronze: od * 3 / 10}}
		for d := range days {
			base := d * 86400
			p.Windows = append(p.Windows, Span{base + int64(r.IntN(4))*3600, base + 10*3600}, Span{base + 12*3600, base + 23*3600})
		}
		s.Providers = append(s.Providers, p)
	}
	d := &Demand{Renters: []Behaviour{Honest, Honest, Honest}}
	tiers := []auction.Tier{auction.Bronze, auction.Silver, auction.Silver, auction.Gold}
	t := int64(120)
	for i := range jobs {
		t += int64(r.IntN(int(horizon / int64(jobs))))
		j := Job{ID: fmt.Sprintf("j%03d", i), Submit: t, Duration: int64(600 + r.IntN(4*3600)), GPUs: 1 + r.IntN(2),
			Models: []string{models[r.IntN(2)]}, Tier: tiers[r.IntN(4)], Kind: "batch", Renter: r.IntN(3)}
		j.MaxPrice = s.OnDemand[j.Models[0]]
		if j.Tier == auction.Gold {
			j.Start = j.Submit + 3600
		}
		d.Jobs = append(d.Jobs, j)
	}
	return s, d, horizon
}

func TestMarketRunsJobsAndConserves(t *testing.T) {
	s, d, h := mkWorld(1, 8, 60, 2)
	st, stats, err := RunMarket(DefaultConfig(), s, d, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConservation(s, d, st, h); err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, o := range st.Outcomes {
		if o.Completed {
			done++
		}
	}
	if done < len(d.Jobs)/3 {
		t.Fatalf("only %d of %d jobs completed", done, len(d.Jobs))
	}
	if st.Messages.Messages == 0 || st.Messages.GossipBytes == 0 || stats.Rounds == 0 {
		t.Fatalf("no traffic counted: %+v %+v", st.Messages, stats)
	}
	t.Logf("%d/%d completed, %+v, %+v", done, len(d.Jobs), st.Messages, stats)
}

func TestMarketDeterministic(t *testing.T) {
	s, d, h := mkWorld(2, 6, 40, 1)
	a, _, err := RunMarket(DefaultConfig(), s, d, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := RunMarket(DefaultConfig(), s, d, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two different runs")
	}
}
