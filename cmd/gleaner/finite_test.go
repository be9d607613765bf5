package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// NaN and ±Inf pass range checks (NaN compares false with everything):
// every float a command reads is refused as a usage error naming it,
// before anything runs, never as "json: unsupported value: NaN" later.
func TestFloatOptionsRefuseNaNAndInf(t *testing.T) {
	cfg := func(yaml string) string {
		f := filepath.Join(t.TempDir(), "sim.yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	sim := func(args ...string) []string {
		return append([]string{"sim", "--providers", "5", "--renters", "2", "--out", t.TempDir()}, args...)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{sim("--adversaries", "skip=NaN"), `--adversaries "skip=NaN": want behaviour=share`},
		{sim("--adversaries", "nonpayer=nan"), `--adversaries "nonpayer=nan"`},
		{sim("--adversaries", "fake=+Inf"), `--adversaries "fake=+Inf"`},
		{sim("--days", "NaN"), "--days NaN: want a finite number"},
		{sim("--days", "-Inf"), "--days -Inf: want a finite number"},
		{sim("--load", "NaN"), "--load NaN: want a finite number"},
		{sim("--load", "Inf"), "--load +Inf: want a finite number"},
		{sim("--loss", "NaN"), "--loss NaN: want a finite number"},
		{sim("--config", cfg("days: .nan\n")), "--days NaN"},
		{sim("--config", cfg("market:\n  verifyshare: .nan\n")), "market.verifyshare NaN: want a finite number"},
		{sim("--config", cfg("supply:\n  pricenoise: .inf\n")), "supply.pricenoise +Inf: want a finite number"},
		{sim("--config", cfg("supply:\n  adversaryshare:\n    skip: .nan\n")), "supply.adversaryshare.skip NaN"},
		{sim("--config", cfg("demand:\n  nonpayershare: -.inf\n")), "demand.nonpayershare -Inf"},
		{[]string{"offer", "set", "--max-power", "NaN"}, "--max-power NaN: want a finite number"},
		{[]string{"offer", "set", "--stop-power", "-Inf"}, "--stop-power -Inf: want a finite number"},
	} {
		r := gleaner(t, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "json:") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args[1:], r.code, r.stderr, c.want)
		}
	}
}
