package renting

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/repo"
)

func TestCanaryRateFallsWithPassesAndResets(t *testing.T) {
	// The streaks are what ledger/trust counts from these probes
	// (TestCanaryStreaksFromProbes there).
	cases := []struct {
		results []ledger.ProbeResult
		streak  int
		rate    float64
	}{
		{nil, 0, 1},
		{[]ledger.ProbeResult{ledger.ProbePassed}, 1, 0.5},
		{[]ledger.ProbeResult{ledger.ProbePassed, ledger.ProbePassed, ledger.ProbePassed}, 3, 0.25},
		{[]ledger.ProbeResult{ledger.ProbePassed, ledger.ProbePassed, ledger.ProbeFailed}, 0, 1},
		{[]ledger.ProbeResult{ledger.ProbeFailed, ledger.ProbePassed}, 1, 0.5},
		{[]ledger.ProbeResult{ledger.ProbePassed, ledger.ProbeInconclusive, ledger.ProbePassed}, 2, 1.0 / 3},
	}
	for _, c := range cases {
		if r := CanaryRate(c.streak, 0.05); r != c.rate {
			t.Errorf("%v: rate %v, want %v", c.results, r, c.rate)
		}
	}
	// Never below the floor, however long the streak.
	if r := CanaryRate(1000, 0.05); r != 0.05 {
		t.Errorf("rate after 1000 passes %v, want the floor 0.05", r)
	}
}

func TestLoadCanaryRefusesSpecsThatCannotFail(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := "name: c\nimage: x:1\nresources: {gpus: 1}\ntier: bronze\nmax_price: 1\nduration: {max: 1m}\n"
	if _, err := loadCanary(write("none.yaml", base), 0); err == nil || !strings.Contains(err.Error(), "expect_sha256") {
		t.Fatalf("a canary without a known answer: %v", err)
	}
	if _, err := loadCanary(filepath.Join(dir, "missing.yaml"), 0); err == nil {
		t.Fatal("a missing canary spec was accepted")
	}
	good := write("good.yaml", base+"verify: {expect_sha256: "+strings.Repeat("ab", 32)+"}\n")
	c, err := loadCanary(good, 0)
	if err != nil || c.minRate != repo.DefaultCanaryMinRate {
		t.Fatalf("good canary: %+v %v", c, err)
	}
	if c, err := loadCanary("", 0); c != nil || err != nil {
		t.Fatal("no canary configured must mean none")
	}
}
