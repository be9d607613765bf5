package auction

import (
	"math/rand"
	"testing"
	"time"
)

// randomSpec draws a valid spec over the vocabulary randomOffer uses.
func randomSpec(r *rand.Rand, now time.Time) *JobSpec {
	s := &JobSpec{
		Name: "prop", Image: "registry.example/team/train:1",
		Tier:           []Tier{Gold, Silver, Bronze}[r.Intn(3)],
		MaxPrice:       Credits(100_000 * (1 + r.Intn(40))),
		Resources:      Resources{GPUs: []int{1, 1, 2, 4}[r.Intn(4)], MinVRAMGB: []int{0, 16, 24, 40, 80}[r.Intn(5)]},
		Duration:       JobDuration{Max: time.Duration(1+r.Intn(12)) * 30 * time.Minute},
		Workload:       Workloads[r.Intn(len(Workloads))],
		AllowSimulated: r.Intn(2) == 0,
	}
	s.Duration.Expected = s.Duration.Max
	if s.Tier == Gold {
		s.Start = now.Add(time.Duration(r.Intn(96)) * 30 * time.Minute)
	}
	some := r.Intn(2) == 0 // else any model
	for _, m := range testModels {
		if some && r.Intn(2) == 0 {
			s.Resources.Models = append(s.Resources.Models, m.model)
		}
	}
	some = r.Intn(2) == 0 // else anywhere
	for _, c := range Continents {
		if some && r.Intn(2) == 0 {
			s.Placement.Regions = append(s.Placement.Regions, c)
		}
	}
	for _, c := range testCountries {
		if r.Intn(4) == 0 {
			s.Placement.DenyCountries = append(s.Placement.DenyCountries, c.country)
		}
	}
	return s
}

// covers is an independent oracle for "[from, to) lies inside one stretch
// of availability": it walks the sorted windows extending a frontier,
// rather than binary-searching as availableSecs does.
func covers(ws []Window, from, to int64) bool {
	at := from
	for _, w := range ws {
		if w.Start <= at && at < w.End {
			at = w.End
		}
	}
	return at > from && at >= to
}

// TestPropertyFeasible: whatever Feasible returns respects residency
// (regions, deny_countries), sells the tier at no more than max_price, and
// has a calendar that keeps the tier's promise; silver in particular is
// never placed where [now, now+max) is not covered, and is never rejected
// by the calendar where it is.
func TestPropertyFeasible(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	accepted := map[Tier]int{}
	for round := 0; round < 400; round++ {
		now := t0.Add(time.Duration(r.Intn(7200)) * time.Second)
		spec := randomSpec(r, now)
		offers := make([]*Offer, 250)
		for i := range offers {
			offers[i] = randomOffer(r, fakeID(uint64(round*1000+i)), t0.Unix())
		}
		ok, rej := Feasible(spec, offers, Env{Now: now})
		if len(ok)+len(rej) != len(offers) {
			t.Fatalf("round %d: %d+%d != %d", round, len(ok), len(rej), len(offers))
		}
		n, maxSecs := now.Unix(), int64(spec.Duration.Max/time.Second)
		for _, o := range ok {
			accepted[spec.Tier]++
			if rs := spec.Placement.Regions; len(rs) > 0 && !contains(rs, o.Region.Continent) {
				t.Fatalf("round %d: %s is in %s, spec wants %v", round, o.Provider, o.Region.Continent, rs)
			}
			if contains(spec.Placement.DenyCountries, o.Region.Country) {
				t.Fatalf("round %d: %s is in denied %s", round, o.Provider, o.Region.Country)
			}
			if f := offerPrice(o, tierIndex(spec.Tier)); f <= 0 || f > spec.MaxPrice {
				t.Fatalf("round %d: %s floor %d, max price %d", round, o.Provider, f, spec.MaxPrice)
			}
			var from, to int64
			switch spec.Tier {
			case Bronze:
				from, to = n, n+1
			case Silver:
				from, to = n, n+maxSecs
			case Gold:
				from, to = spec.Start.Unix(), spec.Start.Unix()+maxSecs
			}
			if !covers(o.Windows, from, to) {
				t.Fatalf("round %d: %s tier %s accepted but [%d, %d) not covered by %v", round, o.Provider, spec.Tier, from, to, o.Windows)
			}
		}
		if spec.Tier != Silver {
			continue
		}
		byProv := map[string]*Offer{}
		for _, o := range offers {
			byProv[o.Provider] = o
		}
		for _, rj := range rej {
			if o := byProv[rj.Provider]; rj.Check == CheckCalendar && covers(o.Windows, n, n+maxSecs) {
				t.Fatalf("round %d: silver rejected by the calendar (%s) but %v covers [%d, %d)", round, rj.Reason, o.Windows, n, n+maxSecs)
			}
		}
	}
	for _, tier := range []Tier{Gold, Silver, Bronze} {
		if accepted[tier] < 20 {
			t.Errorf("only %d %s placements: the property is barely exercised", accepted[tier], tier)
		}
	}
	t.Logf("placements per tier: %v", accepted)
}
