package auction

import "testing"

func TestParseDecimalCredits(t *testing.T) {
	for in, want := range map[string]Credits{"0": 0, "1": 1_000_000, "1.25": 1_250_000, "0.000001": 1, "007.5": 7_500_000,
		"999999999999.999999": 999_999_999_999_999_999} {
		if got, err := ParseDecimalCredits(in); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
		if got, _ := ParseDecimalCredits(FormatCredits(want)); got != want {
			t.Errorf("FormatCredits(%d) does not read back: %d", want, got)
		}
	}
	for _, in := range []string{"", ".5", "5.", "1.2345678", "-1", "+1", "1e3", "1 ", " 1", "1,5", "1000000000000", "1.2.3"} {
		if got, err := ParseDecimalCredits(in); err == nil {
			t.Errorf("%q: accepted as %d", in, got)
		}
	}
}
