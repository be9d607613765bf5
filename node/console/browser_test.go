package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger/trust"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/earnings"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/testnet"
)

// requireChromium skips loudly where Debian's chromium is missing: the
// message goes to stderr too, so `go test` shows it without -v. `make
// test` installs the package first, so there it always runs.
func requireChromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		msg := "SKIP console browser test: no chromium in PATH; install it with `apt-get install -y chromium` (Debian's package; `make test` does this)"
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	return p
}

// TestConsoleInChromium drives a real headless Chromium against two real
// nodes: a provider selling a simulated GPU and a renter whose job holds
// it. It logs in with the repo's token, is refused without it and from
// another site, and checks that each page shows what the RPC returns.
// With GLEANER_CONSOLE_SHOTS=dir it also saves a screenshot of each page.
func TestConsoleInChromium(t *testing.T) {
	chromium := requireChromium(t)
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("this needs a running Docker engine (the job runs in a real container): %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := testnet.BuildDemoImage(ctx, "../.."); err != nil {
		t.Fatal(err)
	}
	// The renter has an on-demand price list for its market page: the
	// RTX4090 at 0.50 and 0.80/2 a GPU-hour, so a median of 0.45.
	prices := filepath.Join(t.TempDir(), "prices.csv")
	if err := os.WriteFile(prices, []byte("gpu_model,gpu_count,vram_mib_total,usd_per_hour,location\nRTX4090,1,24564,0.50,\"Quebec, CA, NA\"\nRTX4090,2,49128,0.80,\"Texas, US, NA\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := testnet.NewCluster(ctx, testnet.ClusterOptions{Nodes: 2, Configure: func(i int, cfg *repo.Config) {
		if i == 0 {
			cfg.Provider.SimulateGPUs = "1xRTX4090"
		} else {
			cfg.Market.OnDemandPrices = prices
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prov, _ := c.Client(0)
	rent, _ := c.Client(1)
	region, bronze, silver := "eu/DE", "0.40", "0.70"
	var shown node.OfferShowResult
	if err := prov.Call(ctx, "offer_set", offers.Patch{Region: &region, PriceBronze: &bronze, PriceSilver: &silver}, &shown); err != nil || !shown.Offered {
		t.Fatalf("offer_set: %v (%s)", err, shown.Reason)
	}
	provID := c.Nodes()[0].Host().ID().String()
	waitFor(t, 20*time.Second, "the offer in the renter's book", func() bool {
		var res node.MarketOffersResult
		return rent.Call(ctx, "market_offers", node.MarketOffersParams{}, &res) == nil && len(res.Offers) == 1 && res.Offers[0].Provider == provID
	})
	spec := fmt.Sprintf("name: console\nimage: %s\ncommand: [\"-sleep\", \"3m\"]\nresources: {gpus: 1}\ntier: silver\nmax_price: 1.00\nduration: {expected: 5m, max: 10m}\nallow_simulated: true\n", testnet.DemoImage)
	var job renting.JobRecord
	if err := rent.Call(ctx, "job_submit", node.JobSubmitParams{Spec: spec}, &job); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the job running", func() bool {
		return rent.Call(ctx, "job_status", node.JobIDParams{ID: job.ID}, &job) == nil && job.State == renting.StateRunning
	})
	defer rent.Call(context.Background(), "job_cancel", node.JobIDParams{ID: job.ID}, nil)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	b, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(b); err != nil { // starts the browser, without the per-step timeout
		t.Fatalf("starting chromium: %v", err)
	}
	shots := os.Getenv("GLEANER_CONSOLE_SHOTS")
	shot := func(name string) {
		if shots == "" {
			return
		}
		png := get(t, b, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string { return strings.TrimSpace(get(t, b, chromedp.Text(chromedp.CSS(sel)))) }

	for i, who := range []string{"provider", "renter"} {
		n := c.Nodes()[i]
		cl, _ := c.Client(i)
		base := n.RPCURL()
		tok, err := n.Repo().Token()
		if err != nil {
			t.Fatal(err)
		}
		// Without a session every page sends the browser to the login.
		do(t, b, chromedp.Navigate(base+"/ui/gpus"), chromedp.WaitVisible(chromedp.CSS("#token")))
		if loc := get(t, b, chromedp.Location()); loc != base+"/ui/login" {
			t.Fatalf("%s: /ui/gpus without a session landed on %s", who, loc)
		}
		if i == 0 {
			shot("login")
		}
		do(t, b, chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS(".error")))
		if got := text(".error"); !strings.Contains(got, "Wrong token") {
			t.Fatalf("%s: a wrong token showed %q", who, got)
		}
		do(t, b, chromedp.SendKeys(chromedp.CSS("#token"), tok), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#peer-id")))
		var info node.InfoResult
		if err := cl.Call(ctx, "node_info", nil, &info); err != nil {
			t.Fatal(err)
		}
		if got := text("#peer-id"); got != info.PeerID {
			t.Errorf("%s: overview shows node ID %q, node_info says %q", who, got, info.PeerID)
		}
		shot(who + "-overview")

		if who == "provider" {
			var os node.OfferShowResult
			if err := cl.Call(ctx, "offer_show", nil, &os); err != nil || len(os.GPUs) != 1 || os.GPUs[0].Lease == nil {
				t.Fatalf("offer_show: %v %+v", err, os.GPUs)
			}
			do(t, b, chromedp.Navigate(base+"/ui/gpus"), chromedp.WaitVisible(chromedp.CSS("#gpus")))
			if got := text(".lease-job"); got != os.GPUs[0].Lease.JobID || got != job.ID {
				t.Errorf("GPUs page shows lease job %q, offer_show says %q (the job is %s)", got, os.GPUs[0].Lease.JobID, job.ID)
			}
			if got := text("#gpus tbody tr"); !strings.Contains(got, "simulated") {
				t.Errorf("a simulated GPU is not labelled so: %q", got)
			}
			shot("provider-gpus")
			providerMoney(t, b, ctx, cl, base, job.ID, text)
			shot("provider-earnings")
			do(t, b, chromedp.Navigate(base+"/ui/reputation"), chromedp.WaitVisible(chromedp.CSS("#score")))
			var ev trust.Evidence
			if err := cl.Call(ctx, "rep_show", node.PeerParamsRep{Peer: provID}, &ev); err != nil {
				t.Fatal(err)
			}
			want := "none (no paid history yet)"
			if ev.Score != nil {
				want = fmt.Sprintf("%.3f (0 to 1)", *ev.Score)
			}
			if got := text("#score"); got != want || text("#leases") != fmt.Sprint(ev.Leases) {
				t.Errorf("reputation page: score %q, %s leases; rep_show: %q, %d", got, text("#leases"), want, ev.Leases)
			}
			shot("provider-reputation")
			continue
		}
		do(t, b, chromedp.Navigate(base+"/ui/jobs"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
		got := text("#jobs .state")
		var st renting.JobRecord
		if err := cl.Call(ctx, "job_status", node.JobIDParams{ID: job.ID}, &st); err != nil {
			t.Fatal(err)
		}
		if got != st.State {
			t.Errorf("jobs page shows state %q, job_status says %q", got, st.State)
		}
		shot("renter-jobs")
		do(t, b, chromedp.Navigate(base+"/ui/jobs/"+job.ID), chromedp.WaitVisible(chromedp.CSS("#explain")))
		if got := text("#explain"); !strings.Contains(got, "Winner "+provID) || !strings.Contains(got, "1 offer(s) considered") {
			t.Errorf("job page's explain: %q", got)
		}
		shot("renter-job")
		var mo node.MarketOffersResult
		if err := cl.Call(ctx, "market_offers", node.MarketOffersParams{Query: "gpus>=1"}, &mo); err != nil {
			t.Fatal(err)
		}
		do(t, b, chromedp.Navigate(base+"/ui/market?q=gpus%3E%3D1"), chromedp.WaitVisible(chromedp.CSS("#matched")))
		if want, got := fmt.Sprintf("%d of %d offer(s) match", mo.Explain.Matched, mo.Explain.Considered), text("#matched"); !strings.HasPrefix(got, want) || len(mo.Offers) != 1 {
			t.Errorf("market page: %q, market_offers: %s (%d offers)", got, want, len(mo.Offers))
		}
		shot("renter-market")
		marketStats(t, b, ctx, cl, base, text)
		shot("renter-market-prices")
		// A bad query shows the RPC's own message by the box.
		var re *rpc.Error
		if err := cl.Call(ctx, "market_offers", node.MarketOffersParams{Query: "vram>>2"}, nil); !errors.As(err, &re) {
			t.Fatalf("market_offers with a bad query: %v", err)
		}
		do(t, b, chromedp.Navigate(base+"/ui/market?q=vram%3E%3E2"), chromedp.WaitVisible(chromedp.CSS("#query-error")))
		if got := text("#query-error"); !strings.Contains(got, re.Message) {
			t.Errorf("bad query shows %q, the RPC says %q", got, re.Message)
		}
		// At phone width the page still fits: nothing wider than the screen.
		do(t, b, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/ui/jobs"), chromedp.WaitVisible(chromedp.CSS("#jobs")))
		if get(t, b, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)) {
			t.Error("the jobs page scrolls sideways at phone width")
		}
		shot("renter-jobs-phone")
		// The market page too, with its tables and charts.
		do(t, b, chromedp.Navigate(base+"/ui/market"), chromedp.WaitVisible(chromedp.CSS("#prices")))
		if get(t, b, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)) {
			t.Error("the market page scrolls sideways at phone width")
		}
		do(t, b, chromedp.EmulateViewport(1280, 900))
		crossSite(t, b, base, info.PeerID)
	}
}

// crossSite submits a form to the console from another site's page, in
// the same browser that holds a session: it must be refused, and the
// session must survive it.
func crossSite(t *testing.T, b context.Context, base, peerID string) {
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/ui/logout"><input type="hidden" name="csrf" value="guess"><button id="go">go</button></form>`, base)
	}))
	defer evil.Close()
	other := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1) // another site than 127.0.0.1
	do(t, b, chromedp.Navigate(other), chromedp.Click(chromedp.CSS("#go")))
	waitFor(t, 10*time.Second, "the cross-site POST's answer", func() bool {
		return strings.HasPrefix(get(t, b, chromedp.Location()), base)
	})
	if body := get(t, b, chromedp.Text(chromedp.CSS("body"))); !strings.Contains(body, "forbidden") {
		t.Errorf("a cross-site POST got %q, want forbidden", body)
	}
	do(t, b, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#peer-id")))
	if got := strings.TrimSpace(get(t, b, chromedp.Text(chromedp.CSS("#peer-id")))); got != peerID {
		t.Errorf("after the cross-site POST the session is gone: %q", got)
	}
}

// do and get run browser steps with a bound on each, so a page that never
// shows what is awaited fails the test instead of hanging it.
func do(t *testing.T, b context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("chromium: %v", err)
	}
}

func get[T any](t *testing.T, b context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return v
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// providerMoney checks the earnings page's per-job table against
// ledger_earnings: the running job's lease is listed, with its tier, as
// running until it settles.
func providerMoney(t *testing.T, b context.Context, ctx context.Context, cl *rpc.Client, base, jobID string, text func(string) string) {
	t.Helper()
	do(t, b, chromedp.Navigate(base+"/ui/earnings"), chromedp.WaitVisible(chromedp.CSS("#jobs-table")))
	var e earnings.Result
	if err := cl.Call(ctx, "ledger_earnings", earnings.PeriodParams{Days: 14}, &e); err != nil {
		t.Fatal(err)
	}
	var ej *earnings.Job
	for i := range e.Jobs {
		if e.Jobs[i].JobID == jobID {
			ej = &e.Jobs[i]
		}
	}
	if ej == nil {
		t.Fatalf("ledger_earnings lists no lease of job %s: %+v", jobID, e.Jobs)
	}
	row := text("#jobs-table tbody tr")
	for _, want := range []string{jobID, string(ej.Tier), "running (settles at its end)"} {
		if !strings.Contains(row, want) {
			t.Errorf("earnings page's job row %q lacks %q (ledger_earnings: %+v)", row, want, *ej)
		}
	}
	if ej.Settled {
		t.Errorf("the running job's lease is settled: %+v", *ej)
	}
}

// marketStats checks the market page's prices and supply against
// market_stats, with the renter's on-demand price list.
func marketStats(t *testing.T, b context.Context, ctx context.Context, cl *rpc.Client, base string, text func(string) string) {
	t.Helper()
	var ms node.MarketStatsResult
	if err := cl.Call(ctx, "market_stats", nil, &ms); err != nil {
		t.Fatal(err)
	}
	if len(ms.Prices) == 0 || len(ms.Regions) != 1 || ms.OnDemandSource != "prices.csv" {
		t.Fatalf("market_stats: %+v", ms)
	}
	do(t, b, chromedp.Navigate(base+"/ui/market"), chromedp.WaitVisible(chromedp.CSS("#prices")), chromedp.WaitVisible(chromedp.CSS("#price-charts svg")))
	if want, got := fmt.Sprintf("%d live offer(s), %d GPU(s)", ms.Offers, ms.GPUs), text("#stats-as-of"); !strings.HasPrefix(got, want) {
		t.Errorf("market page: %q, market_stats: %q", got, want)
	}
	p := ms.Prices[0]
	od, ok := ms.OnDemand[p.Model]
	if !ok || od != 450_000 {
		t.Errorf("market_stats' on-demand price of %s: %v (want 0.45 from the list)", p.Model, ms.OnDemand)
	}
	row := text("#prices tbody tr")
	for _, want := range []string{p.Model, string(p.Tier), auction.FormatCredits(p.Median) + " credits/GPU-h", auction.FormatCredits(od) + " credits/GPU-h",
		fmt.Sprintf("%d %%", (int64(p.Median)*100+int64(od)/2)/int64(od))} {
		if !strings.Contains(row, want) {
			t.Errorf("market page's first price row %q lacks %q (market_stats: %+v)", row, want, p)
		}
	}
	r := ms.Regions[0]
	if got := text("#regions tbody tr"); !strings.Contains(got, r.Continent) || !strings.Contains(got, r.Country) || !strings.Contains(got, fmt.Sprint(r.GPUs)) {
		t.Errorf("market page's supply row %q, market_stats: %+v", got, r)
	}
	if got := text("#on-demand-note"); !strings.Contains(got, "prices.csv") {
		t.Errorf("on-demand note: %q", got)
	}
}
