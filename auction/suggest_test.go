package auction

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSuggest(t *testing.T) {
	nets := []string{"testnet", "local"}
	for _, c := range []struct {
		in   string
		list []string
		want string
	}{
		{"testent", nets, "testnet"}, // a swap is one edit
		{"tsetnet", nets, "testnet"},
		{"Testnet", nets, "testnet"}, // case is ignored
		{"lcoal", nets, "local"},
		{"locl", nets, "local"},
		{"mainnet", nets, ""}, // four edits: a different word, not a slip
		{"H101", KnownModels, "H100"},
		{"RTX4O90", KnownModels, "RTX4090"},
		{"ue", Continents, "eu"},
		{"xy", Continents, ""}, // short words allow one edit only
		{"", nets, ""},
	} {
		if got := Suggest(c.in, c.list); got != c.want {
			t.Errorf("Suggest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := DidYouMean("testent", nets); got != `; did you mean "testnet"?` {
		t.Errorf("DidYouMean = %q", got)
	}
	if got := DidYouMean("mainnet", nets); got != "" {
		t.Errorf("DidYouMean(mainnet) = %q, want none", got)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"testent", "testnet", 1}, {"ab", "ba", 1}, {"h101", "h100", 1}, {"abc", "abc", 0},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := editDistance(c.b, c.a); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90m": 90 * time.Minute, "1h30m": 90 * time.Minute, "1.5h": 90 * time.Minute, "0": 0,
		"2d": 48 * time.Hour, "1d12h": 36 * time.Hour, "0d": 0, "30d": 720 * time.Hour, "1d0.5h": 24*time.Hour + 30*time.Minute,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "1.5d", "-2d", "+2h", "-1h", "2d-1h", "2d+1h", "2 d", "2days", "1w", "36501d", "36500d2000000h", "h", "90"} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		} else if !strings.Contains(err.Error(), "2d") {
			t.Errorf("ParseDuration(%q): %v does not show the forms", in, err)
		}
	}
}

// TestDaysMeanTheSameEverywhere: 2d in a spec and in a query are 48h.
func TestDaysMeanTheSameEverywhere(t *testing.T) {
	s, err := ParseJobSpec(exampleWith(9, "duration: {expected: 1d12h, max: 2d}"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Duration.Max != 48*time.Hour || s.Duration.Expected != 36*time.Hour {
		t.Errorf("spec: max %v expected %v, want 48h and 36h", s.Duration.Max, s.Duration.Expected)
	}
	a, err := ParseQuery("available>=2d")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseQuery("available>=48h")
	if err != nil {
		t.Fatal(err)
	}
	if a.clauses[0].nums[0] != b.clauses[0].nums[0] || a.clauses[0].nums[0] != int64(s.Duration.Max/time.Second) {
		t.Errorf("query 2d = %ds, 48h = %ds, spec 2d = %v", a.clauses[0].nums[0], b.clauses[0].nums[0], s.Duration.Max)
	}
	if _, err := ParseJobSpec(exampleWith(9, "duration: {max: 31d}")); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("31d: got %v, want the 30-day limit", err)
	}
}

func TestCheckModel(t *testing.T) {
	for _, ok := range []string{
		"H100", "h100", "RTX4090", "A100-80GB", "RTX4080", "L40S", "B200", "A800-80GB",
		// not listed, but extending a known model names another board
		"A100", "RTX4090D", "V100-32GB", "H800-80GB",
		// not listed and near nothing: a board newer than the list
		"MI300X", "Z9000",
	} {
		if err := checkModel(ok); err != nil {
			t.Errorf("checkModel(%q) = %v, want nil", ok, err)
		}
	}
	for in, want := range map[string]string{
		"RTX4O90":  `did you mean "RTX4090"?`,
		"H101":     `did you mean "H100"?`,
		"A100-80G": `did you mean "A100-80GB"?`, // cut short, though it extends A10
		"RTX490":   `did you mean "RTX4090"?`,
		"A100 80":  "not a GPU model",
	} {
		if err := checkModel(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkModel(%q) = %v, want %q", in, err, want)
		}
	}
	if err := checkModel("H101"); err == nil || !strings.Contains(err.Error(), "RTX4090") {
		t.Errorf("the error should list common models: %v", err)
	}
}

func TestParseRegion(t *testing.T) {
	for in, want := range map[string]Region{
		"eu/DE": {Continent: "eu", Country: "DE"}, "na/us": {Continent: "na", Country: "US"}, "EU/de": {Continent: "eu", Country: "DE"},
		"as/RU": {Continent: "as", Country: "RU"}, "eu/RU": {Continent: "eu", Country: "RU"}, "oc/AU": {Continent: "oc", Country: "AU"}, " sa/BR ": {Continent: "sa", Country: "BR"},
	} {
		if got, err := ParseRegion(in); err != nil || got != want {
			t.Errorf("ParseRegion(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"eu/XX":  `"XX" is not an ISO 3166-1 alpha-2 country code`,
		"na/DE":  `DE is not in na; did you mean "eu/DE"?`,
		"eu/UK":  `did you mean "GB"?`,
		"ue/DE":  `did you mean "eu"?`,
		"europe": "want continent/country",
		"xx/DE":  "is not a continent code",
	} {
		if _, err := ParseRegion(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRegion(%q) = %v, want %q", in, err, want)
		}
	}
}

// TestEveryCountryHasAContinent keeps the continent table and the ISO list
// in step: a code on no continent could never be a provider's region.
func TestEveryCountryHasAContinent(t *testing.T) {
	for _, c := range strings.Fields(isoCountries) {
		if len(continentsOf(c)) == 0 {
			t.Errorf("%s is on no continent", c)
		}
	}
	for cont, list := range countryContinents {
		if !isContinent(cont) {
			t.Errorf("%s is not a continent", cont)
		}
		for _, c := range strings.Fields(list) {
			if !strings.Contains(isoCountries, " "+c+" ") {
				t.Errorf("%s/%s is not an ISO code", cont, c)
			}
		}
	}
}

// TestTyposAreErrors: each input a new user mistyped gives its error,
// with the suggestion, in the parser's own error form.
func TestTyposAreErrors(t *testing.T) {
	for _, c := range []struct {
		line        int
		repl, field string
		want        string
	}{
		{6, "resources: {gpus: 1, models: [RTX4O90]}", "resources.models[0]", `did you mean "RTX4090"?`},
		{11, "placement: {regions: [ue]}", "placement.regions[0]", `did you mean "eu"?`},
		{11, "placement: {deny_countries: [UK]}", "placement.deny_countries[0]", `did you mean "GB"?`},
	} {
		_, err := ParseJobSpec(exampleWith(c.line, c.repl))
		var se *SpecError
		if !errors.As(err, &se) || se.Line != c.line || se.Field != c.field || !strings.Contains(se.Msg, c.want) {
			t.Errorf("%s: got %v, want line %d %s: ...%s", c.repl, err, c.line, c.field, c.want)
		}
	}
	for in, want := range map[string]string{
		"gpu=H101":                  `at column 5: gpu: "H101" is not a GPU model gleaner knows; did you mean "H100"?`,
		"vram>=40 gpu in [RTX4O90]": `at column 18: gpu: "RTX4O90" is not a GPU model gleaner knows; did you mean "RTX4090"?`,
		"region=ue":                 `at column 8: region: "ue" is not a continent code (af, an, as, eu, na, oc, sa); did you mean "eu"?`,
		"region=eu/DE":              `region is a continent; for a country write country=DE`,
		"country=XX":                `at column 9: country: "XX" is not an ISO 3166-1 alpha-2 country code`,
		"country=uk":                `did you mean "GB"?`,
	} {
		if _, err := ParseQuery(in); err == nil || !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
}
