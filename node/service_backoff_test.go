package node

import (
	"testing"
	"time"
)

func TestHealBackoffDoublesUpToItsCap(t *testing.T) {
	want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, serviceHealBackoff, serviceHealBackoff}
	for n, w := range want {
		if got := healBackoff(serviceSync, n); got != w {
			t.Errorf("healBackoff(%d) = %v, want %v", n, got, w)
		}
	}
	for _, n := range []int{17, 64, 1 << 20} {
		if got := healBackoff(serviceSync, n); got != serviceHealBackoff {
			t.Errorf("healBackoff(%d) = %v, want the cap %v", n, got, serviceHealBackoff)
		}
	}
}
