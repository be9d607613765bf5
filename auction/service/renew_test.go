package service

import (
	"strings"
	"testing"
	"time"
)

// The renewal decision (renew.go): when a replica gets its
// successor, and the margin's cap for short leases.
func TestRenewDueAndMargin(t *testing.T) {
	for _, c := range []struct {
		delay, lease, want time.Duration
	}{
		{0, 24 * time.Hour, RenewAllowance},                    // a day's lease: the allowance
		{30 * time.Second, time.Hour, 90 * time.Second},        // a slow model gets its delay too
		{0, 30 * time.Second, 15 * time.Second},                // capped at half a short lease
		{5 * time.Minute, 100 * time.Second, 50 * time.Second}, // the delay capped too
		{0, 0, 0},
	} {
		if got := renewMargin(c.delay, c.lease); got != c.want {
			t.Errorf("renewMargin(%v, %v) = %v, want %v", c.delay, c.lease, got, c.want)
		}
	}

	start := time.Unix(1_800_000_000, 0)
	end := start.Add(30 * time.Second) // margin 15 s
	live := replicaLease{Running: true, EverReady: true, Start: start, End: end}
	for _, c := range []struct {
		what string
		at   time.Duration // after start
		r    replicaLease
		due  bool
	}{
		{"early in the lease", 5 * time.Second, live, false},
		{"a second before the margin", 14 * time.Second, live, false},
		{"at the margin", 15 * time.Second, live, true},
		{"a second before the end", 29 * time.Second, live, true},
		{"at the end (healing's turn)", 30 * time.Second, live, false},
		{"not running", 20 * time.Second, replicaLease{EverReady: true, Start: start, End: end}, false},
		{"never ready (given up instead)", 20 * time.Second, replicaLease{Running: true, Start: start, End: end}, false},
		{"a successor already bought", 20 * time.Second, replicaLease{Running: true, EverReady: true, Renewing: true, Start: start, End: end}, false},
		{"a successor failed for this lease", 20 * time.Second, replicaLease{Running: true, EverReady: true, Tried: true, Start: start, End: end}, false},
		{"no lease known", 20 * time.Second, replicaLease{Running: true, EverReady: true}, false},
	} {
		due, why := renewDue(start.Add(c.at), c.r, 0)
		if due != c.due {
			t.Errorf("%s: due %v, want %v (%s)", c.what, due, c.due, why)
		}
		if due && !strings.Contains(why, "in 15s") && !strings.Contains(why, "renewed 15s ahead") {
			t.Errorf("%s: why %q does not say the margin", c.what, why)
		}
	}
	// A day's lease with a 2 min initial delay: renewed 3 min ahead.
	dayEnd := start.Add(24 * time.Hour)
	day := replicaLease{Running: true, EverReady: true, Start: start, End: dayEnd}
	if due, _ := renewDue(dayEnd.Add(-181*time.Second), day, 2*time.Minute); due {
		t.Error("renewed more than initial_delay + allowance ahead")
	}
	if due, why := renewDue(dayEnd.Add(-179*time.Second), day, 2*time.Minute); !due || !strings.Contains(why, "renewed 3m0s ahead") {
		t.Errorf("not renewed within initial_delay + allowance: %v %q", due, why)
	}
}
