package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/testnet"
)

// TestPricesInEffectFromTheCLI is issue 35's price surprise, end to end:
// during a x2 peak, market offers shows the peak price with the base
// beside it and filters by it; a job whose max_price is below it is
// refused in words that name the peak, and job explain suggests the
// change that admits the most; a leased job's run and status say what
// the lease costs and why.
func TestPricesInEffectFromTheCLI(t *testing.T) {
	requireDocker(t)
	// A peak from the last hour to three hours on, in UTC, around now:
	// silver at 0.6 asks 1.2 now.
	from := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	until := from.Add(4 * time.Hour)
	peak := fmt.Sprintf("%s %s-%s x2", strings.ToLower(from.Weekday().String()[:3]), from.Format("15:04"), until.Format("15:04"))

	peaky, plain, renter := initRepo(t), initRepo(t), initRepo(t)
	p1 := startDaemon(t, peaky, "--simulate-gpus", "1xRTX4090")
	p2 := startDaemon(t, plain, "--simulate-gpus", "1xRTX4090", "--bootstrap", p1.addrs[0])
	startDaemon(t, renter, "--bootstrap", p1.addrs[0])
	mustOK(t, gleaner(t, "--repo", peaky, "offer", "set", "--region", "eu/DE", "--price.silver", "0.6", "--tz", "UTC", "--peak", peak), "offer set (peak)")
	mustOK(t, gleaner(t, "--repo", plain, "offer", "set", "--region", "eu/DE", "--price.silver", "1.5"), "offer set (plain)")

	type view struct {
		Offers []struct {
			Provider string           `json:"provider"`
			Prices   map[string]int64 `json:"prices"`
			InEffect map[string]struct {
				Base, Floor, Price int64
				Why                string
			} `json:"in_effect"`
		} `json:"offers"`
	}
	offers := func(query string) view {
		t.Helper()
		r := gleaner(t, "--repo", renter, "market", "offers", query, "--json")
		mustOK(t, r, "market offers "+query)
		var v view
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("market offers --json: %v\n%s", err, r.stdout)
		}
		return v
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(offers("gpu=RTX4090").Offers) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the renter never saw both offers")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Shown at its peak price, the base beside it, and why.
	v := offers("price.silver<=1.2")
	if len(v.Offers) != 1 || v.Offers[0].Provider != p1.peerID {
		t.Fatalf("price.silver<=1.2: %+v, want the peak offer alone", v.Offers)
	}
	s := v.Offers[0].InEffect["silver"]
	wantWhy := "peak x2 until " + until.Format("15:04") + " UTC"
	if s.Base != 600_000 || s.Floor != 1_200_000 || s.Price != 1_200_000 || s.Why != wantWhy || v.Offers[0].Prices["silver"] != 600_000 {
		t.Errorf("in_effect.silver %+v, prices %v; want base 0.6, floor and price 1.2, why %q", s, v.Offers[0].Prices, wantWhy)
	}
	// Filtered by it: at or below 1.0 neither offer is in effect.
	if v := offers("price.silver<=1.0"); len(v.Offers) != 0 {
		t.Errorf("price.silver<=1.0 during the peak listed %+v", v.Offers)
	}
	if v := offers("floor.silver<=1.0"); len(v.Offers) != 1 {
		t.Errorf("floor.silver<=1.0 (the base floor) listed %d offers, want the peak one", len(v.Offers))
	}
	r := gleaner(t, "--repo", renter, "market", "offers", "-o", "price.silver")
	mustOK(t, r, "market offers")
	if !strings.Contains(r.stdout, "1.2 (0.6)") || !strings.Contains(r.stdout, "silver 1.2: "+wantWhy) {
		t.Errorf("the table does not show the peak price beside the base and why:\n%s", r.stdout)
	}

	// A job of max_price 1.0 is refused, and the refusal names the peak.
	spec := func(name, maxPrice string) string {
		p := filepath.Join(t.TempDir(), name+".yaml")
		body := "name: " + name + "\nimage: " + testnet.DemoImage + "\ncommand: [\"-sleep\", \"300ms\"]\n" +
			"resources: {gpus: 1}\ntier: silver\nmax_price: " + maxPrice + "\nduration: {max: 10m}\nallow_simulated: true\n" +
			"retry: {max_reauctions: 0}\n"
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r = gleaner(t, "--repo", renter, "job", "submit", spec("cheap", "1.0"))
	mustOK(t, r, "job submit (cheap)")
	id := strings.TrimSpace(r.stdout)
	deadline = time.Now().Add(30 * time.Second)
	for {
		r = gleaner(t, "--repo", renter, "job", "explain", id)
		mustOK(t, r, "job explain")
		if strings.Contains(r.stdout, "offers considered") && !strings.HasPrefix(r.stdout, "0 offers") || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, want := range []string{
		"2 offers considered: 0 feasible, 2 rejected",
		"silver floor 1.2/GPU-h in effect (" + wantWhy + "; base 0.6), above max_price 1",
		"silver floor 1.5/GPU-h, above max_price 1",
		"suggestion: raise max_price to 1.5 to admit 2 more offer(s)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("job explain lacks %q:\n%s", want, r.stdout)
		}
	}

	// job run says the same when nobody can run a job.
	r = gleaner(t, "--repo", renter, "job", "run", spec("cheap-run", "1.0"))
	if r.code != 1 || !strings.Contains(r.stderr, "refused:   ") || !strings.Contains(r.stderr, "in effect ("+wantWhy) ||
		!strings.Contains(r.stderr, "suggest:   raise max_price to 1.5 to admit 2 more offer(s)") {
		t.Errorf("job run of a job the peak prices out: exit %d\n%s", r.code, r.stderr)
	}

	// A job of max_price 2 leases from the peak offer at the runner-up's
	// price, and says so.
	r = gleaner(t, "--repo", renter, "job", "run", spec("dear", "2"))
	mustOK(t, r, "job run (dear)")
	if !strings.Contains(r.stderr, "why:       ") || !strings.Contains(r.stderr, "the second-score rule") ||
		!strings.Contains(r.stderr, "your max 2; the winner asked 1.2") {
		t.Errorf("job run does not say why the lease costs what it does:\n%s", r.stderr)
	}
	r = gleaner(t, "--repo", renter, "job", "ls", "--json")
	var jobs []struct {
		ID, Name string
	}
	if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Name != "dear" {
			continue
		}
		r = gleaner(t, "--repo", renter, "job", "status", j.ID, "--json")
		mustOK(t, r, "job status --json")
		var st struct {
			Provider string `json:"provider"`
			Price    int64  `json:"lease_price"`
			Why      *struct {
				Price       int64  `json:"price"`
				Bound       string `json:"bound"`
				WinnerBid   int64  `json:"winner_bid"`
				RunnerUp    string `json:"runner_up"`
				RunnerUpBid int64  `json:"runner_up_bid"`
				MaxPrice    int64  `json:"max_price"`
				Why         string `json:"why"`
			} `json:"price_why"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatal(err)
		}
		if w := st.Why; st.Provider != p1.peerID || w == nil || w.Price != st.Price || w.Bound != "runner-up" ||
			w.WinnerBid != 1_200_000 || w.RunnerUp != p2.peerID || w.RunnerUpBid != 1_500_000 || w.MaxPrice != 2_000_000 {
			t.Errorf("job status --json: provider %s, price %d, price_why %+v", st.Provider, st.Price, st.Why)
		}
		r = gleaner(t, "--repo", renter, "job", "status", j.ID)
		if !strings.Contains(r.stdout, "why:       ") || !strings.Contains(r.stdout, "the runner-up's price, the second-score rule") {
			t.Errorf("job status does not say why:\n%s", r.stdout)
		}
		return
	}
	t.Fatalf("no job named dear in %s", r.stdout)
}
