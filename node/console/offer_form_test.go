package console

import (
	"strings"
	"testing"
)

// NaN and ±Inf parse as floats and pass every range check, so the form
// refuses them by the watts field itself, as a word that is no number.
func TestOfferFormRefusesNaNWatts(t *testing.T) {
	f := offerField{Name: "max_power_w", Kind: "float"}
	for _, v := range []string{"NaN", "nan", "inf", "+Inf", "-Infinity", "1e400"} {
		if p, msg := patchParam(f, v); p != nil || !strings.Contains(msg, "want a number of watts") {
			t.Errorf("%q: param %v, message %q; want refused by the field", v, p, msg)
		}
	}
	if p, msg := patchParam(f, "300.5"); p != 300.5 || msg != "" {
		t.Errorf("300.5: param %v, message %q", p, msg)
	}
}
