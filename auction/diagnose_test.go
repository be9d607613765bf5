package auction

import "testing"

func TestDiagnoseListsEveryFailedCheck(t *testing.T) {
	o := validOffer(fakeID(1), t0) // bronze 1.2, 2xH100, 32 CPUs, eu/DE
	spec := baseSpec()
	spec.MaxPrice = 1_000_000               // price
	spec.Placement.Regions = []string{"na"} // region
	spec.Resources.GPUs = 4                 // gpus
	spec.Resources.CPUs = 64                // host
	got := Diagnose(spec, o, Env{Now: t0})
	want := []string{CheckPrice, CheckRegion, CheckGPUs, CheckHost}
	if len(got) != len(want) {
		t.Fatalf("failures %+v, want the four checks %v", got, want)
	}
	for i, f := range got {
		if f.Check != want[i] || f.Reason == "" || f.Detail == "" {
			t.Errorf("failure %d: %+v, want check %s with a reason and its numbers", i, f, want[i])
		}
	}
	// Feasible still charges the offer to the first of them alone.
	_, rej := Feasible(spec, []*Offer{o}, Env{Now: t0})
	if len(rej) != 1 || rej[0].Check != CheckPrice || rej[0].All != nil {
		t.Errorf("Feasible: %+v", rej)
	}
	if Diagnose(baseSpec(), o, Env{Now: t0}) != nil {
		t.Error("a feasible offer has failures")
	}
}

func TestRelaxPicksTheChangeAdmittingMost(t *testing.T) {
	spec := baseSpec() // bronze, max 1.5, eu
	var offers []*Offer
	add := func(n int, bronze Credits, continent, country string) {
		for range n {
			o := validOffer(fakeID(uint64(len(offers)+1)), t0)
			o.Prices.Bronze, o.Region = bronze, Region{Continent: continent, Country: country}
			offers = append(offers, o)
		}
	}
	add(2, 1_000_000, "eu", "DE") // feasible
	add(2, 1_800_000, "eu", "DE") // price only: raise max_price to 1.8 admits 2
	add(1, 2_500_000, "eu", "FR") // price only, dearer: raise to 2.5 admits 3
	add(4, 1_000_000, "na", "US") // region only: add na admits 4
	add(1, 3_000_000, "na", "US") // price and region: no single change
	add(2, 1_000_000, "as", "JP") // region only
	env := Env{Now: t0}
	got := Relax(spec, offers, env)
	if got == nil || got.Change != "drop placement.regions [eu]" || got.Admits != 6 {
		t.Fatalf("got %+v, want drop placement.regions [eu] admitting 6", got)
	}
	// Every change it reports is true: applying it admits that many.
	s := *spec
	s.Placement.Regions = nil
	if n, base := countFeasible(&s, offers, env), countFeasible(spec, offers, env); n-base != got.Admits {
		t.Errorf("dropping the regions admits %d, Relax said %d", n-base, got.Admits)
	}
	// Without the Asian offers, adding na (4) beats raising the price (3).
	got = Relax(spec, offers[:len(offers)-2], env)
	if got == nil || got.Change != "add na to placement.regions" || got.Admits != 4 {
		t.Errorf("got %+v, want add na admitting 4", got)
	}
	// Without the American ones, the price: the highest floor, 3 offers.
	got = Relax(spec, offers[:5], env)
	if got == nil || got.Change != "raise max_price to 2.5" || got.Admits != 3 {
		t.Errorf("got %+v, want raise max_price to 2.5 admitting 3", got)
	}
	if got := Relax(spec, offers[:2], env); got != nil {
		t.Errorf("every offer feasible: suggested %+v", got)
	}
}
