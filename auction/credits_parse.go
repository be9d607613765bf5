package auction

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseDecimalCredits reads a canonical non-negative decimal with at most
// 6 places ("1.25", "007.5") as micro-credits, exactly: no floats, and
// nothing a machine-written file would not hold (no sign, no exponent, no
// space, no bare "5." or ".5"). It is for data files (the simulator's
// CSVs, the on-demand price list); amounts people type go through
// offers.ParseCredits, which is kinder. FormatCredits is its inverse.
func ParseDecimalCredits(s string) (Credits, error) {
	const digits = "0123456789"
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || len(whole) > 12 || strings.Trim(whole, digits) != "" ||
		dot && (frac == "" || len(frac) > 6 || strings.Trim(frac, digits) != "") {
		return 0, fmt.Errorf("%q is not a decimal with at most 6 places", s)
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	var f int64
	if dot {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return Credits(w*1_000_000 + f), nil
}
