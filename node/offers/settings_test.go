package offers

import (
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
