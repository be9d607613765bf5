package node

import (
	"testing"
	"time"
)

// Only replicas that ran and never got ready count towards the streak
// that stops healing: one no provider took blames the market, not the
// spec's readiness check.
func TestOnlyReplicasThatRanUnreadyCountTowardsTheHealLimit(t *testing.T) {
	cases := []struct {
		name               string
		noMatch, everReady bool
		want               bool
	}{
		{"ran, never ready", false, false, true},
		{"ran, was ready", false, true, false},
		{"no provider took it", true, false, false},
	}
	for _, c := range cases {
		if got := countsAsUnready(c.noMatch, c.everReady); got != c.want {
			t.Errorf("%s: counts %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHealBackoffDoublesUpToItsCap(t *testing.T) {
	want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, serviceHealBackoff, serviceHealBackoff}
	for n, w := range want {
		if got := healBackoff(n); got != w {
			t.Errorf("healBackoff(%d) = %v, want %v", n, got, w)
		}
	}
	for _, n := range []int{17, 64, 1 << 20} {
		if got := healBackoff(n); got != serviceHealBackoff {
			t.Errorf("healBackoff(%d) = %v, want the cap %v", n, got, serviceHealBackoff)
		}
	}
}
