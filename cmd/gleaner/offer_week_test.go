package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/urfave/cli/v2"
)

// TestOfferShowDrawsTheWeek: offer show prints the schedule in the flags'
// syntax and a day-by-hour strip per tier whose marks follow the floors
// in force, with '.' where nothing is available.
func TestOfferShowDrawsTheWeek(t *testing.T) {
	ws, _ := auction.ParseWeekly("mon-fri 09:00-18:00")
	pricing := auction.Pricing{TimeZone: "Europe/Berlin", SurgeBP: 5_000, CapBP: 13_000,
		Periods: []auction.PricePeriod{{Weekly: ws[0], MultBP: 15_000, Floors: auction.Prices{Gold: 2_000_000}}}}
	cal := auction.Calendar{TimeZone: "Europe/Berlin", Weekly: []auction.WeeklyWindow{{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "08:00", End: "20:00"}}}
	prices := auction.Prices{Gold: 1_500_000, Bronze: 400_000}
	from := time.Date(2026, 3, 26, 12, 0, 0, 0, time.UTC) // a Thursday
	week, err := auction.WeekPrices(&cal, prices, &pricing, from)
	if err != nil {
		t.Fatal(err)
	}
	var settings offers.Settings
	settings.Calendar, settings.Prices, settings.Pricing = cal, prices, pricing
	var b strings.Builder
	printOfferShow(&b, node.OfferShowResult{Reason: "paused", Settings: settings, Week: &week})
	out := b.String()
	for _, want := range []string{
		"pricing:     peaks mon,tue,wed,thu,fri 09:00-18:00 x1.5 gold=2 (Europe/Berlin); surge 0.5 when busy, at most x1.3",
		"floors by hour, credits per GPU-hour (Europe/Berlin)",
		//            0     6     12    18
		"  thu 03-26  ........-=========--....  ........-=========--....",
		"  sat 03-28  ........................  ........................",
		"gold: - 1.5  = 2",
		"bronze: - 0.4  = 0.6",
		"surge: up to x1.3 these when fully busy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printOfferShow(&b, node.OfferShowResult{Reason: "paused"})
	if !strings.Contains(b.String(), "pricing:     the floors at every hour; no surge") {
		t.Errorf("no pricing:\n%s", b.String())
	}
}

// TestOfferSetPricingFlags: --peak repeats without splitting at the
// commas of day lists and tier floors, and the pricing flags reach the
// patch that offer_set applies.
func TestOfferSetPricingFlags(t *testing.T) {
	var patch offers.Patch
	n := 0
	cmd := offerSetCommand()
	cmd.Action = func(c *cli.Context) error { patch, n = offerPatch(c); return nil }
	app := &cli.App{Name: "gleaner", Commands: []*cli.Command{cmd}}
	err := app.Run([]string{"gleaner", "set", "--peak", "mon-fri 09:00-18:00 x1.5", "--peak", "sat,sun 10:00-16:00 gold=2.0,silver=1",
		"--peak.bronze", "0.5", "--surge", "0.5", "--surge-cap", "2x"})
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 || patch.Peak == nil || *patch.Peak != "mon-fri 09:00-18:00 x1.5; sat,sun 10:00-16:00 gold=2.0,silver=1" ||
		*patch.PeakBronze != "0.5" || *patch.Surge != "0.5" || *patch.SurgeCap != "2x" || patch.PeakGold != nil {
		t.Fatalf("patch %+v (%d fields)", patch, n)
	}
	s := offers.Settings{Calendar: auction.Calendar{TimeZone: "Europe/Berlin"}}
	got, err := patch.Apply(s)
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Pricing; len(p.Periods) != 2 || p.Periods[1].Floors != (auction.Prices{Gold: 2_000_000, Silver: 1_000_000, Bronze: 500_000}) ||
		p.SurgeBP != 5_000 || p.CapBP != 20_000 || p.TimeZone != "Europe/Berlin" {
		t.Fatalf("applied %+v", p)
	}
}
