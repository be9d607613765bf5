package offers

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

func TestParseCredits(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "0.45": 450_000, "1.5": 1_500_000, "12": 12_000_000, ".5": 500_000, "0.000001": 1} {
		got, err := ParseCredits(in)
		if err != nil || int64(got) != want {
			t.Errorf("ParseCredits(%q) = %d, %v; want %d", in, got, err, want)
		}
		if back, _ := ParseCredits(auction.FormatCredits(got)); back != got {
			t.Errorf("FormatCredits(%d) = %q does not round-trip", got, auction.FormatCredits(got))
		}
	}
	for _, bad := range []string{"", "-1", "+1", "1.2345678", "abc", "1e3", "."} {
		if _, err := ParseCredits(bad); err == nil {
			t.Errorf("ParseCredits(%q) accepted", bad)
		}
	}
}

func TestOfferPatchNamesTheBadField(t *testing.T) {
	s := func(v string) *string { return &v }
	ls := func(v ...string) *[]string { return &v }
	n := func(v int) *int { return &v }
	cases := []struct {
		patch Patch
		field string
	}{
		{Patch{Region: s("europe")}, "region"},
		{Patch{Region: s("xx/DE")}, "region"},
		{Patch{PriceGold: s("-2")}, "price_gold"},
		{Patch{TimeZone: s("Mars/Olympus")}, "time_zone"},
		{Patch{Weekly: s("someday 25:00-26:00")}, "weekly"},
		{Patch{Blackouts: ls("yesterday/today")}, "blackouts"},
		{Patch{Workloads: ls("mining")}, "workloads"},
		{Patch{MaxDuration: s("forever")}, "max_duration"},
		{Patch{MaxTempC: n(500)}, "max_temperature_c"},
	}
	for _, c := range cases {
		before := DefaultSettings()
		_, err := c.patch.Apply(before)
		if err == nil || !strings.HasPrefix(err.Error(), c.field+":") {
			t.Errorf("%+v: got %v, want an error starting with %q", c.patch, err, c.field)
		}
	}
	got, err := Patch{Region: s("eu/de"), PriceBronze: s("0.45"), Weekly: s("mon-fri 19:00-08:00"), TimeZone: s("Europe/Berlin")}.Apply(DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if got.Region.Country != "DE" || got.Prices.Bronze != 450_000 || len(got.Calendar.Weekly) != 1 || got.Ready() != nil {
		t.Fatalf("valid patch applied wrongly: %+v (ready: %v)", got, got.Ready())
	}
}

func TestPatchPricing(t *testing.T) {
	s := func(v string) *string { return &v }
	base, err := Patch{Region: s("eu/DE"), PriceGold: s("1.5"), PriceBronze: s("0.4"), TimeZone: s("Europe/Berlin")}.Apply(DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if base.Pricing.SurgeBP != DefaultSurgeBP || base.OfferPricing() == nil {
		t.Fatalf("default surge %+v", base.Pricing)
	}
	got, err := Patch{Peak: s("mon-fri 09:00-18:00 x1.5; sat,sun 22:00-02:00 gold=2.0,bronze=0.5 1.2x"), Surge: s("0.25"), SurgeCap: s("2x")}.Apply(base)
	if err != nil {
		t.Fatal(err)
	}
	p := got.Pricing
	if p.TimeZone != "Europe/Berlin" || p.SurgeBP != 2_500 || p.CapBP != 20_000 || len(p.Periods) != 2 {
		t.Fatalf("pricing %+v", p)
	}
	if p.Periods[0].MultBP != 15_000 || p.Periods[0].Weekly.Days[4] != "fri" || p.Periods[1].MultBP != 12_000 ||
		p.Periods[1].Floors != (auction.Prices{Gold: 2_000_000, Bronze: 500_000}) || p.Periods[1].Weekly.End != "02:00" {
		t.Fatalf("periods %+v", p.Periods)
	}
	// The printed form parses back to the same period.
	again, err := ParsePeaks(p.Periods[1].String())
	if err != nil || len(again) != 1 || again[0].String() != p.Periods[1].String() {
		t.Fatalf("%q does not round-trip: %+v %v", p.Periods[1].String(), again, err)
	}
	// A later zone change moves the periods with the calendar.
	moved, err := Patch{TimeZone: s("America/New_York")}.Apply(got)
	if err != nil || moved.Pricing.TimeZone != "America/New_York" {
		t.Fatalf("zone not followed: %+v %v", moved.Pricing, err)
	}
	// A tier floor for every period; then clearing the periods.
	gold, err := Patch{PeakGold: s("3")}.Apply(got)
	if err != nil || gold.Pricing.Periods[0].Floors.Gold != 3_000_000 || gold.Pricing.Periods[1].Floors.Gold != 3_000_000 {
		t.Fatalf("peak_gold: %+v %v", gold.Pricing.Periods, err)
	}
	cleared, err := Patch{Peak: s(""), Surge: s("0"), SurgeCap: s("0")}.Apply(gold)
	if err != nil || cleared.OfferPricing() != nil || cleared.Pricing.TimeZone != "" {
		t.Fatalf("cleared: %+v %v", cleared.Pricing, err)
	}
	// OfferPricing does not share the settings' periods.
	op := got.OfferPricing()
	op.Periods[0].MultBP = 99
	if got.Pricing.Periods[0].MultBP != 15_000 {
		t.Fatal("OfferPricing aliases the settings")
	}
}

func TestPatchPricingNamesTheBadField(t *testing.T) {
	s := func(v string) *string { return &v }
	withPeak, err := Patch{Peak: s("daily 18:00-22:00 x2")}.Apply(DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		patch Patch
		on    Settings
		field string
		says  string
	}{
		{Patch{Peak: s("mon-fri 09:00-18:00")}, DefaultSettings(), "peak", "a price"},
		{Patch{Peak: s("someday 09:00-18:00 x2")}, DefaultSettings(), "peak", `peak 1 "someday`},
		{Patch{Peak: s("mon 09:00-18:00 x2; tue 25:00-26:00 x2")}, DefaultSettings(), "peak", "peak 2"},
		{Patch{Peak: s("mon 09:00-18:00 x0.5")}, DefaultSettings(), "peak", "1..10"},
		{Patch{Peak: s("mon 09:00-18:00 x11")}, DefaultSettings(), "peak", "1..10"},
		{Patch{Peak: s("mon 09:00-18:00 x1.23456")}, DefaultSettings(), "peak", "4 places"},
		{Patch{Peak: s("mon 09:00-18:00 platinum=2")}, DefaultSettings(), "peak", "tier must be"},
		{Patch{Peak: s("mon 09:00-18:00 gold=-2")}, DefaultSettings(), "peak", "gold"},
		{Patch{Peak: s(strings.Repeat("mon 09:00-18:00 x2;", auction.MaxPricePeriods+1))}, DefaultSettings(), "peak", "limit"},
		{Patch{PeakGold: s("2")}, DefaultSettings(), "peak_gold", "--peak"},
		{Patch{PeakSilver: s("abc")}, withPeak, "peak_silver", "amount"},
		{Patch{Surge: s("4")}, DefaultSettings(), "surge", "0..3"},
		{Patch{Surge: s("-1")}, DefaultSettings(), "surge", "surge"},
		{Patch{SurgeCap: s("0.5x")}, DefaultSettings(), "surge_cap", "undercut"},
		{Patch{SurgeCap: s("5x")}, DefaultSettings(), "surge_cap", "0..4"},
	} {
		_, err := c.patch.Apply(c.on)
		if err == nil || !strings.HasPrefix(err.Error(), c.field+":") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: got %v, want %q naming %q", c.patch, err, c.field, c.says)
		}
	}
}

// TestPricingPersists: the schedule survives the store's JSON, and
// settings saved before pricing existed keep the old default surge.
func TestPricingPersists(t *testing.T) {
	s := func(v string) *string { return &v }
	set, err := Patch{TimeZone: s("Europe/Berlin"), Peak: s("mon-fri 17:00-22:00 x1.5 gold=2"), SurgeCap: s("1.25x")}.Apply(DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(State{Settings: set, Seq: 3})
	if err != nil {
		t.Fatal(err)
	}
	back := State{Settings: DefaultSettings()}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got, want := back.Settings.OfferPricing(), set.OfferPricing(); !reflect.DeepEqual(got, want) {
		t.Fatalf("pricing after the store: %+v, want %+v", got, want)
	}
	old := State{Settings: DefaultSettings()}
	if err := json.Unmarshal([]byte(`{"settings":{"prices":{"bronze":450000}},"seq":9}`), &old); err != nil {
		t.Fatal(err)
	}
	if p := old.Settings.OfferPricing(); p == nil || p.SurgeBP != DefaultSurgeBP || len(p.Periods) != 0 {
		t.Fatalf("old settings' pricing %+v", p)
	}
}

// The hard limits are set like the soft ones and must not lie below them.
func TestPatchHardLimits(t *testing.T) {
	soft, hard, low := 85, 92, 80
	s, err := Patch{MaxTempC: &soft, StopTempC: &hard}.Apply(DefaultSettings())
	if err != nil || s.Limits.StopTempC != 92 || s.Limits.MaxTempC != 85 {
		t.Fatalf("hard limit: %+v %v", s.Limits, err)
	}
	if _, err := (Patch{StopTempC: &low}).Apply(s); err == nil || !strings.Contains(err.Error(), "stop_temperature_c") {
		t.Fatalf("a hard limit below the soft one: %v, want refused naming the field", err)
	}
	watts := 300.0
	if _, err := (Patch{MaxPowerW: &watts, StopPowerW: new(float64)}).Apply(s); err != nil {
		t.Fatalf("no hard power limit: %v", err)
	}
}
