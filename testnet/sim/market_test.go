package sim

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

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

// The book's views (by model and region, and only providers open now for
// a job that starts now) only spare the auctioneer work: with the whole
// book in every round, the run comes out the same.
func TestBookViewsChangeNothing(t *testing.T) {
	s, d, h := mkWorld(4, 8, 50, 2)
	a, _, err := RunMarket(DefaultConfig(), s, d, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	wholeBook = true
	defer func() { wholeBook = false }()
	b, _, err := RunMarket(DefaultConfig(), s, d, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Only how many offers a failed round counted differs.
	known := regexp.MustCompile(`[0-9]+ offers known( besides the [0-9]+ this job left)?`)
	for i := range a.Outcomes {
		x, y := a.Outcomes[i], b.Outcomes[i]
		x.Reason, y.Reason = known.ReplaceAllString(x.Reason, "offers known"), known.ReplaceAllString(y.Reason, "offers known")
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("job %d: the book's views changed its outcome:\n%+v\n%+v", i, x, y)
		}
	}
}

// A configuration the market cannot run is refused by name, before any
// coroutine could divide by zero or spin at one instant.
func TestMarketConfigRefused(t *testing.T) {
	s, d, h := mkWorld(1, 2, 3, 1)
	for name, mutate := range map[string]func(*Config){
		"market.retry":       func(c *Config) { c.Retry = 0 },
		"market.leasemargin": func(c *Config) { c.LeaseMargin = time.Second },
		"market.clearing":    func(c *Config) { c.Clearing = "first-price" },
		"market.offerttl":    func(c *Config) { c.OfferTTL = 0 },
		"market.billing":     func(c *Config) { c.Billing = 2 * time.Hour },
		"network.loss":       func(c *Config) { c.Network.Loss = 1 },
	} {
		c := DefaultConfig()
		mutate(&c)
		if _, _, err := RunMarket(c, s, d, h, nil); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want an error naming it", name, err)
		}
	}
}
