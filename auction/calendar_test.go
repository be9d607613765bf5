package auction

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func utc(s string) int64 {
	t, err := time.Parse("2006-01-02 15:04", s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

func win(a, b string) Window { return Window{utc(a), utc(b)} }

func mustWeekly(t *testing.T, spec string) []WeeklyWindow {
	t.Helper()
	w, err := ParseWeekly(spec)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func expand(t *testing.T, c *Calendar, from, to string) []Window {
	t.Helper()
	ws, err := c.Windows(time.Unix(utc(from), 0), time.Unix(utc(to), 0))
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func sameWindows(t *testing.T, got, want []Window) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		var g, w []string
		for _, x := range got {
			g = append(g, time.Unix(x.Start, 0).UTC().Format("01-02 15:04")+"→"+time.Unix(x.End, 0).UTC().Format("01-02 15:04"))
		}
		for _, x := range want {
			w = append(w, time.Unix(x.Start, 0).UTC().Format("01-02 15:04")+"→"+time.Unix(x.End, 0).UTC().Format("01-02 15:04"))
		}
		t.Fatalf("windows (UTC)\n got  %v\n want %v", g, w)
	}
}

// Berlin switches to CEST on Sun 2026-03-29 and back to CET on Sun
// 2026-10-25. Weekday nights plus whole weekends, in exact UTC instants.
func TestCalendarBerlinDST(t *testing.T) {
	c := &Calendar{TimeZone: "Europe/Berlin", Weekly: mustWeekly(t, "mon-fri 19:00-08:00; sat,sun 00:00-24:00")}
	sameWindows(t, expand(t, c, "2026-03-26 00:00", "2026-04-01 00:00"), []Window{
		win("2026-03-26 00:00", "2026-03-26 07:00"), // Wed night, clipped
		win("2026-03-26 18:00", "2026-03-27 07:00"), // Thu 19:00 CET - Fri 08:00 CET
		win("2026-03-27 18:00", "2026-03-29 22:00"), // Fri 19:00 CET - Mon 00:00 CEST: 52 h, not 53
		win("2026-03-30 17:00", "2026-03-31 06:00"), // Mon 19:00 CEST - Tue 08:00 CEST
		win("2026-03-31 17:00", "2026-04-01 00:00"), // clipped
	})
	sameWindows(t, expand(t, c, "2026-10-22 00:00", "2026-10-28 00:00"), []Window{
		win("2026-10-22 00:00", "2026-10-22 06:00"),
		win("2026-10-22 17:00", "2026-10-23 06:00"), // CEST
		win("2026-10-23 17:00", "2026-10-25 23:00"), // Fri 19:00 CEST - Mon 00:00 CET: 54 h
		win("2026-10-26 18:00", "2026-10-27 07:00"), // CET
		win("2026-10-27 18:00", "2026-10-28 00:00"),
	})
	// A night window across each switch: 13 wall hours, 12 and 14 real ones.
	n := &Calendar{TimeZone: "Europe/Berlin", Weekly: mustWeekly(t, "sat 19:00-08:00")}
	sameWindows(t, expand(t, n, "2026-03-28 00:00", "2026-03-30 00:00"), []Window{win("2026-03-28 18:00", "2026-03-29 06:00")})
	sameWindows(t, expand(t, n, "2026-10-24 00:00", "2026-10-26 00:00"), []Window{win("2026-10-24 17:00", "2026-10-25 07:00")})
	// Wall times in the gap move forward; repeated ones take the later instant.
	g := &Calendar{TimeZone: "Europe/Berlin", Weekly: mustWeekly(t, "sun 02:30-04:00")}
	sameWindows(t, expand(t, g, "2026-03-29 00:00", "2026-03-30 00:00"), []Window{win("2026-03-29 01:30", "2026-03-29 02:00")})
	sameWindows(t, expand(t, g, "2026-10-25 00:00", "2026-10-26 00:00"), []Window{win("2026-10-25 01:30", "2026-10-25 03:00")})
}

// One wall-clock rule means different instants in different zones, and
// only New York moves on 2026-03-08.
func TestCalendarTimeZones(t *testing.T) {
	ny := &Calendar{TimeZone: "America/New_York", Weekly: mustWeekly(t, "daily 22:00-06:00")}
	tk := &Calendar{TimeZone: "Asia/Tokyo", Weekly: mustWeekly(t, "daily 22:00-06:00")}
	sameWindows(t, expand(t, ny, "2026-03-07 12:00", "2026-03-09 12:00"), []Window{
		win("2026-03-08 03:00", "2026-03-08 10:00"), // Sat 22:00 EST - Sun 06:00 EDT: 7 h
		win("2026-03-09 02:00", "2026-03-09 10:00"), // EDT from now on: 8 h
	})
	sameWindows(t, expand(t, tk, "2026-03-07 12:00", "2026-03-09 12:00"), []Window{
		win("2026-03-07 13:00", "2026-03-07 21:00"),
		win("2026-03-08 13:00", "2026-03-08 21:00"),
	})
}

func TestCalendarOneOffsAndBlackouts(t *testing.T) {
	// No weekly rules and no one-offs: always available, minus blackouts.
	always := &Calendar{TimeZone: "UTC", Blackouts: []Window{win("2026-05-01 10:00", "2026-05-01 12:00")}}
	sameWindows(t, expand(t, always, "2026-05-01 00:00", "2026-05-02 00:00"), []Window{
		win("2026-05-01 00:00", "2026-05-01 10:00"), win("2026-05-01 12:00", "2026-05-02 00:00")})
	// One-offs alone are the only availability.
	one := &Calendar{TimeZone: "UTC", OneOff: []Window{win("2026-05-01 03:00", "2026-05-01 05:00")}}
	sameWindows(t, expand(t, one, "2026-05-01 00:00", "2026-05-02 00:00"), []Window{win("2026-05-01 03:00", "2026-05-01 05:00")})
	// Union with weekly (touching merges), blackouts trim, split and delete.
	c := &Calendar{
		TimeZone: "UTC",
		Weekly:   mustWeekly(t, "fri 22:00-02:00; sat 10:00-12:00; sat 14:00-16:00"), // 2026-05-01 is a Friday
		OneOff:   []Window{win("2026-05-02 02:00", "2026-05-02 04:00")},
		Blackouts: []Window{
			win("2026-05-01 21:00", "2026-05-01 23:00"), // trims the start
			win("2026-05-02 01:00", "2026-05-02 01:30"), // splits
			win("2026-05-02 14:00", "2026-05-02 16:00"), // deletes exactly
		},
	}
	sameWindows(t, expand(t, c, "2026-05-01 00:00", "2026-05-03 00:00"), []Window{
		win("2026-05-01 23:00", "2026-05-02 01:00"),
		win("2026-05-02 01:30", "2026-05-02 04:00"), // midnight wrap + one-off, merged
		win("2026-05-02 10:00", "2026-05-02 12:00"),
	})
	// End == start is a whole day, wrapping midnight.
	d := &Calendar{TimeZone: "UTC", Weekly: mustWeekly(t, "wed 06:00-06:00")}
	sameWindows(t, expand(t, d, "2026-04-28 00:00", "2026-05-02 00:00"), []Window{win("2026-04-29 06:00", "2026-04-30 06:00")})
}

func TestAvailableFor(t *testing.T) {
	ws := []Window{{100, 200}, {200, 300}, {400, 500}}
	for _, c := range []struct {
		now  int64
		want time.Duration
	}{{50, 0}, {100, 200 * time.Second}, {250, 50 * time.Second}, {300, 0}, {499, time.Second}, {500, 0}} {
		if got := AvailableFor(ws, time.Unix(c.now, 0)); got != c.want {
			t.Errorf("at %d: got %s, want %s", c.now, got, c.want)
		}
	}
}

func TestCalendarValidate(t *testing.T) {
	for _, c := range []struct {
		cal  Calendar
		want string
	}{
		{Calendar{TimeZone: "Mars/Olympus"}, "time_zone"},
		{Calendar{TimeZone: "Local"}, "time_zone"},
		{Calendar{TimeZone: "UTC", Weekly: []WeeklyWindow{{Days: []string{"monday"}, Start: "00:00", End: "01:00"}}}, `weekly[0]: day "monday"`},
		{Calendar{TimeZone: "UTC", Weekly: []WeeklyWindow{{Days: []string{"mon"}, Start: "24:00", End: "01:00"}}}, "start"},
		{Calendar{TimeZone: "UTC", Weekly: []WeeklyWindow{{Days: []string{"mon", "mon"}, Start: "00:00", End: "01:00"}}}, "repeated"},
		{Calendar{TimeZone: "UTC", Blackouts: []Window{{5, 5}}}, "blackouts[0]"},
	} {
		if err := c.cal.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.cal, err, c.want)
		}
	}
	if _, err := (&Calendar{TimeZone: "UTC"}).Windows(t0, t0.Add(500*24*time.Hour)); err == nil {
		t.Error("unbounded span accepted")
	}
}

func TestParseWeekly(t *testing.T) {
	got := mustWeekly(t, "mon-fri 19:00-08:00; sat,sun 00:00-24:00;")
	want := []WeeklyWindow{
		{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "19:00", End: "08:00"},
		{Days: []string{"sat", "sun"}, Start: "00:00", End: "24:00"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	if w := mustWeekly(t, "Fri-Mon 22:00-06:00"); !reflect.DeepEqual(w[0].Days, []string{"mon", "fri", "sat", "sun"}) {
		t.Fatalf("wrapping range: %v", w[0].Days)
	}
	for spec, want := range map[string]string{
		"": "no rules",
		"mon-fri 19:00-08:00; funday 00:00-01:00": `rule 2 "funday 00:00-01:00"`,
		"mon 7:00-08:00":      `"7:00": want HH:MM`,
		"mon 19:00-25:00":     `end: "25:00": out of range`,
		"mon 19:00":           "want HH:MM-HH:MM",
		"mon 19:00 - 20:00":   `want "DAYS HH:MM-HH:MM"`,
		"mon-xyz 19:00-20:00": `"mon-xyz" is not a day`,
	} {
		_, err := ParseWeekly(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", spec, err, want)
		}
	}
}
