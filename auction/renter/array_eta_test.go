package renter

import (
	"testing"
	"time"
)

func TestArrayETAOnFixedTimes(t *testing.T) {
	m := time.Minute
	for _, c := range []struct {
		name              string
		done, inFlight    []time.Duration
		waiting, parallel int
		want              time.Duration
		ok                bool
	}{
		{"nothing done yet: no estimate", nil, []time.Duration{m}, 5, 2, 0, false},
		// Average 10m; 4 waiting (40m) and two in flight 4m and 12m in
		// (6m and 0m left): 46m over 2 in flight.
		{"waiting and in flight", []time.Duration{8 * m, 12 * m}, []time.Duration{4 * m, 12 * m}, 4, 2, 23 * m, true},
		// Nothing in flight (between steps): max_parallel shares the work.
		{"none in flight", []time.Duration{6 * m}, nil, 9, 3, 18 * m, true},
		{"last wave", []time.Duration{10 * m, 10 * m}, []time.Duration{7 * m}, 0, 4, 3 * m, true},
		{"all overdue", []time.Duration{10 * m}, []time.Duration{15 * m}, 0, 4, 0, true},
		{"done", []time.Duration{10 * m}, nil, 0, 4, 0, true},
	} {
		got, ok := ArrayETA(c.done, c.inFlight, c.waiting, c.parallel)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestFormatETA(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                             "<1m",
		59 * time.Second:              "<1m",
		time.Minute:                   "1m",
		3*time.Minute + time.Second:   "4m",
		59 * time.Minute:              "59m",
		time.Hour + 4*time.Minute + 1: "1h05m",
		26 * time.Hour:                "26h00m",
	} {
		if got := FormatETA(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}
