package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gleaner-net/gleaner/auction"
)

const blCredit = auction.Credits(1_000_000)

// blProvider is a provider of model "A100" in DE/eu with the same floor
// for every tier.
func blProvider(id string, gpus int, floor auction.Credits, windows ...Span) Provider {
	return Provider{ID: id, Model: "A100", GPUs: gpus, Country: "DE", Continent: "eu",
		Floors: auction.Prices{Gold: floor, Silver: floor, Bronze: floor}, Windows: windows}
}

// blJob is a job for any model and region, paying up to 10 credits.
func blJob(id string, tier auction.Tier, submit, duration int64, gpus int) Job {
	j := Job{ID: id, Tier: tier, Submit: submit, Duration: duration, GPUs: gpus, MaxPrice: 10 * blCredit}
	if tier == auction.Gold {
		j.Start = submit
	}
	return j
}

func blWorld(ps []Provider, js ...Job) (*Supply, *Demand) {
	return &Supply{Providers: ps}, &Demand{Jobs: js}
}

// blRandomInstance is a random market: providers with on/off windows,
// jobs of every tier with mixed models, regions and price caps.
func blRandomInstance(seed uint64, providers, jobs int, horizon int64) (*Supply, *Demand) {
	r := rand.New(rand.NewPCG(seed, 7))
	models := []string{"A100", "H100"}
	places := [][2]string{{"DE", "eu"}, {"FR", "eu"}, {"US", "na"}}
	s := &Supply{}
	for i := range providers {
		pl := places[r.IntN(len(places))]
		p := Provider{ID: fmt.Sprintf("p%05d", i), Model: models[r.IntN(2)], GPUs: []int{1, 2, 4, 8}[r.IntN(4)],
			Country: pl[0], Continent: pl[1]}
		base := auction.Credits(1+r.IntN(3)) * blCredit
		p.Floors = auction.Prices{Gold: base + blCredit/2, Silver: base, Bronze: base / 2}
		if r.IntN(5) == 0 {
			p.Floors.Gold = 0 // not every provider sells gold
		}
		t := int64(r.IntN(4)) * 1800
		for t < horizon+7200 {
			up := 1800 + int64(r.IntN(int(horizon/2)+1))
			p.Windows = append(p.Windows, Span{t, t + up})
			t += up + 600 + int64(r.IntN(int(horizon/4)+1))
		}
		s.Providers = append(s.Providers, p)
	}
	d := &Demand{}
	tiers := []auction.Tier{auction.Gold, auction.Silver, auction.Bronze}
	regions := []string{"", "", "eu", "US"}
	for i := range jobs {
		j := Job{ID: fmt.Sprintf("j%05d", i), Submit: int64(r.IntN(int(horizon))),
			Duration: 300 + int64(r.IntN(4*3600)), GPUs: []int{1, 1, 2, 4}[r.IntN(4)],
			Tier: tiers[r.IntN(3)], MaxPrice: auction.Credits(1+r.IntN(4)) * blCredit,
			Region: regions[r.IntN(len(regions))]}
		if r.IntN(3) == 0 {
			j.Models = []string{models[r.IntN(2)]}
		}
		if j.Tier == auction.Gold {
			j.Start = j.Submit + int64(r.IntN(7200))
		}
		d.Jobs = append(d.Jobs, j)
	}
	slices.SortStableFunc(d.Jobs, func(a, b Job) int { return int(a.Submit - b.Submit) })
	return s, d
}

// blUseful is a strategy's useful GPU-seconds.
func blUseful(st Strategy) int64 {
	var n int64
	for _, o := range st.Outcomes {
		n += o.Done
	}
	return n
}

func blMustRun(t interface {
	Helper()
	Fatalf(string, ...any)
}, name string, s *Supply, d *Demand, opt BaselineOptions) Strategy {
	t.Helper()
	st, err := RunBaseline(name, s, d, opt)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return st
}
