package console_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/testnet"
)

// TestOfferFormInChromium edits a provider's offer through the console's
// form in a real headless Chromium: the change reaches offer_show and the
// offer another node's book holds, a bad value shows the RPC's own
// message by its field, and the calendar and GPU pages show the RPC's
// figures. No job runs, so it needs no Docker.
func TestOfferFormInChromium(t *testing.T) {
	chromium := requireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := testnet.NewCluster(ctx, testnet.ClusterOptions{Nodes: 2, Configure: func(i int, cfg *repo.Config) {
		if i == 0 {
			cfg.Provider.SimulateGPUs = "1xRTX4090"
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prov, _ := c.Client(0)
	rent, _ := c.Client(1)
	region, bronze := "eu/DE", "0.40"
	var shown node.OfferShowResult
	if err := prov.Call(ctx, "offer_set", offers.Patch{Region: &region, PriceBronze: &bronze}, &shown); err != nil || !shown.Offered {
		t.Fatalf("offer_set: %v (%s)", err, shown.Reason)
	}
	provID := c.Nodes()[0].Host().ID().String()
	bookBronze := func() auction.Credits {
		var res node.MarketOffersResult
		if rent.Call(ctx, "market_offers", node.MarketOffersParams{}, &res) != nil || len(res.Offers) != 1 || res.Offers[0].Provider != provID {
			return -1
		}
		return res.Offers[0].Prices["bronze"]
	}
	waitFor(t, 20*time.Second, "the offer in the renter's book", func() bool { return bookBronze() == 400_000 })

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	b, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(b); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	shot := func(name string) { // as TestConsoleInChromium's, with GLEANER_CONSOLE_SHOTS=dir
		if dir := os.Getenv("GLEANER_CONSOLE_SHOTS"); dir != "" {
			if err := os.WriteFile(filepath.Join(dir, name+".png"), get(t, b, chromedp.FullScreenshot(100)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	text := func(sel string) string { return strings.TrimSpace(get(t, b, chromedp.Text(chromedp.CSS(sel)))) }
	base := c.Nodes()[0].RPCURL()
	tok, err := c.Nodes()[0].Repo().Token()
	if err != nil {
		t.Fatal(err)
	}
	do(t, b, chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), tok), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#peer-id")))

	// The form shows the settings; a change is saved and published.
	do(t, b, chromedp.Navigate(base+"/ui/offer"), chromedp.WaitVisible(chromedp.CSS("#f-price_bronze")))
	if got := get(t, b, chromedp.Value(chromedp.CSS("#f-price_bronze"))); got != "0.4" {
		t.Errorf("the form shows bronze %q, offer_set set 0.40", got)
	}
	setField := func(id, v string) {
		do(t, b, chromedp.Clear(chromedp.CSS(id)), chromedp.SendKeys(chromedp.CSS(id), v))
	}
	setField("#f-price_bronze", "0.65")
	setField("#f-peak", "mon-sun 18:00-20:00 x1.5")
	do(t, b, chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("#saved")))
	if err := prov.Call(ctx, "offer_show", nil, &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Settings.Prices.Bronze != 650_000 || shown.Offer == nil || shown.Offer.Prices["bronze"] != 650_000 || len(shown.Settings.Pricing.Periods) != 1 {
		t.Fatalf("after the form, offer_show: settings %+v, offer %+v", shown.Settings, shown.Offer)
	}
	waitFor(t, 20*time.Second, "the new price in the renter's book", func() bool { return bookBronze() == 650_000 })

	// A bad value: the RPC's message by the field, the typed value kept,
	// nothing changed.
	bad := "na/DE"
	var re *rpc.Error
	if err := prov.Call(ctx, "offer_set", offers.Patch{Region: &bad}, nil); !errors.As(err, &re) {
		t.Fatalf("offer_set with region %s: %v", bad, err)
	}
	setField("#f-region", bad)
	do(t, b, chromedp.Click(chromedp.CSS("#save")), chromedp.WaitVisible(chromedp.CSS("#e-region")))
	shot("provider-offer-error")
	if got := text("#e-region"); got != re.Message {
		t.Errorf("the form shows %q by the region, offer_set says %q", got, re.Message)
	}
	if got := get(t, b, chromedp.Value(chromedp.CSS("#f-region"))); got != bad {
		t.Errorf("the form lost the typed region: %q", got)
	}
	if got := get(t, b, chromedp.Value(chromedp.CSS("#f-price_bronze"))); got != "0.65" {
		t.Errorf("the form shows bronze %q after the refusal", got)
	}
	if err := prov.Call(ctx, "offer_show", nil, &shown); err != nil || shown.Settings.Region.Continent != "eu" {
		t.Errorf("a refused form changed the region: %v %+v", err, shown.Settings.Region)
	}

	// The calendar: today's peak hours at offer_show's week's floor.
	if shown.Week == nil || len(shown.Week.Days) != 7 {
		t.Fatalf("offer_show's week: %+v", shown.Week)
	}
	do(t, b, chromedp.Navigate(base+"/ui/calendar"), chromedp.WaitVisible(chromedp.CSS("#calendar")))
	shot("provider-calendar")
	day := shown.Week.Days[0]
	want := "bronze " + auction.FormatCredits(day.Floors[auction.Bronze][18]) + " credits/GPU-h"
	if got := text("#calendar tr.peak"); !strings.Contains(got, day.Date) || !strings.Contains(got, "18:00–20:00") || !strings.Contains(got, want) {
		t.Errorf("the calendar's first peak row is %q, want %s 18:00–20:00 %s", got, day.Date, want)
	}
	if got := text("#calendar tr.open .floors"); got != "bronze 0.65 credits/GPU-h" {
		t.Errorf("an open hour's floors: %q", got)
	}
	if got := text("#legend"); !strings.Contains(got, "P peak") || !strings.Contains(got, "G reserved") {
		t.Errorf("legend: %q", got)
	}
	do(t, b, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/ui/calendar"), chromedp.WaitVisible(chromedp.CSS("#calendar")))
	if get(t, b, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)) {
		t.Error("the calendar scrolls sideways at phone width")
	}
	shot("provider-calendar-phone")
	do(t, b, chromedp.EmulateViewport(1280, 900))

	// The GPUs, in the CLI's units: offer show's "24 GiB" and "35°C",
	// a simulated GPU's temperature included (it wanders by a degree or
	// two between two reads).
	if err := prov.Call(ctx, "offer_show", nil, &shown); err != nil || len(shown.GPUs) != 1 {
		t.Fatalf("offer_show: %v %+v", err, shown.GPUs)
	}
	g := shown.GPUs[0]
	nearTemp := func(what, got, suffix string) {
		var deg int
		if _, err := fmt.Sscanf(strings.TrimSuffix(got, suffix), "%d°C", &deg); err != nil || !strings.HasSuffix(got, "°C"+suffix) || deg < g.TempC-3 || deg > g.TempC+3 {
			t.Errorf("%s shows the temperature as %q; offer_show reads %d, which the CLI prints as %d°C", what, got, g.TempC, g.TempC)
		}
	}
	do(t, b, chromedp.Navigate(base+"/ui/gpus"), chromedp.WaitVisible(chromedp.CSS("#gpus")))
	if got, want := text("#gpus tbody tr"), fmt.Sprintf("RTX4090 (%.0f GiB)", float64(g.VRAMMiB)/1024); !strings.Contains(got, want) {
		t.Errorf("the GPUs page's row %q lacks %q", got, want)
	}
	nearTemp("the GPUs page", text("#gpus .temp"), "")

	// One GPU's page: a simulated GPU, said so, its readings charted.
	do(t, b, chromedp.Navigate(base+"/ui/gpus/0"), chromedp.WaitVisible(chromedp.CSS("#gpu")))
	shot("provider-gpu")
	if got := text("#simulated"); got != "simulated" {
		t.Errorf("the GPU page's label: %q", got)
	}
	if got := text("#history"); !strings.Contains(got, "simulated") {
		t.Errorf("the GPU page's history: %q", got)
	}
	nearTemp("the GPU page", text("#temp"), " (simulated)")
}
