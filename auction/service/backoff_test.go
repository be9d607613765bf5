package service

import (
	"testing"
	"time"
)

func TestHealBackoffDoublesUpToItsCap(t *testing.T) {
	want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, HealBackoffMax, HealBackoffMax}
	for n, w := range want {
		if got := HealBackoff(SyncEvery, n); got != w {
			t.Errorf("HealBackoff(%d) = %v, want %v", n, got, w)
		}
	}
	for _, n := range []int{17, 64, 1 << 20} {
		if got := HealBackoff(SyncEvery, n); got != HealBackoffMax {
			t.Errorf("HealBackoff(%d) = %v, want the cap %v", n, got, HealBackoffMax)
		}
	}
}
