package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
)

// `job status` shows a reservation's start and counts down to it; once
// the job has begun it says so instead.
func TestJobStatusShowsTheReservation(t *testing.T) {
	start := time.Now().Add(2*time.Hour + 30*time.Second).Truncate(time.Second)
	j := renting.JobRecord{ID: "j", State: renting.StateReserved, Reserved: &start}
	var b strings.Builder
	printJob(&b, j)
	if out := b.String(); !strings.Contains(out, "reserved:  "+start.Local().Format(time.DateTime)) || !strings.Contains(out, "(starts in 2h0m") {
		t.Errorf("a waiting reservation:\n%s", out)
	}
	began := start.Add(time.Second)
	j.State, j.StartedAt = renting.StateRunning, &began
	b.Reset()
	printJob(&b, j)
	if out := b.String(); !strings.Contains(out, "(began)") || strings.Contains(out, "starts in") {
		t.Errorf("a reservation that began:\n%s", out)
	}
}
