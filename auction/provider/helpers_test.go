package provider

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
)

// t0 is a Monday, 00:00 UTC: virtual time starts here.
var t0 = time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// inventories are machines of n GPUs, built once: the week's simulation
// reads them often.
var inventories = func() (out [17]attest.Inventory) {
	for n := range out {
		for i := range n {
			out[n].GPUs = append(out[n].GPUs, attest.GPU{Index: i, UUID: fmt.Sprintf("GPU-%02d", i), Model: "RTX4090"})
		}
	}
	return out
}()

// availability is an inventory of n GPUs, all sellable but those out.
func availability(n int, out map[int]string) attest.Availability {
	a := attest.Availability{Inventory: inventories[n], Withdrawn: map[int]string{}}
	for i := range n {
		if why, ok := out[i]; ok {
			a.Withdrawn[i] = why
		} else {
			a.Available = append(a.Available, i)
		}
	}
	return a
}

func newSched(n int, opts ...Option) *Scheduler {
	s := New(opts...)
	s.SetAvailability(availability(n, nil), t0)
	return s
}

// mkLease is a lease of job at tier for dur from start: one credit per
// GPU-hour, a 60 s billing interval, 30 s of notice.
func mkLease(job string, tier auction.Tier, gpus int, start time.Time, dur time.Duration) *auction.Lease {
	return &auction.Lease{JobID: job, Renter: "renter-" + job, Provider: "provider", Tier: tier,
		Price: 1_000_000, GPUs: gpus, Start: start.Unix(), End: start.Add(dur).Unix(), NoticeSec: 30, BillingSec: 60}
}

// mustClaim claims gpus for a lease of job at now, failing the test if it
// cannot. Its renter is established (a renter that has paid before), so
// that its award holds its GPUs as every award did before the newcomer
// rule; newcomer_test.go claims newcomers' awards with claimAs.
func mustClaim(t testing.TB, s *Scheduler, job string, tier auction.Tier, now time.Time, gpus ...int) []Action {
	t.Helper()
	s.Establish("renter-" + job)
	acts, err := s.Claim(mkLease(job, tier, len(gpus), now, time.Hour), gpus, now)
	if err != nil {
		t.Fatalf("claim %s %v: %v", job, gpus, err)
	}
	return acts
}

// show renders actions as "kind:job" for comparisons.
func show(acts []Action) string {
	var b []string
	for _, a := range acts {
		b = append(b, a.Kind.String()+":"+a.JobID)
	}
	return strings.Join(b, " ")
}

// holders maps each GPU to the jobs committed to it at now.
func holders(s *Scheduler, now time.Time) map[int][]string {
	out := map[int][]string{}
	for _, c := range s.Commitments(now) {
		out[c.GPU] = append(out[c.GPU], c.JobID)
	}
	return out
}

// attestErr is what the owner's monitor reports when the inventory cannot
// be read.
func attestErr(msg string) attest.Availability { return attest.Availability{Err: msg} }

// mustStart starts job at now, failing the test if it cannot.
func mustStart(t testing.TB, s *Scheduler, job string, now time.Time) []Action {
	t.Helper()
	acts, err := s.Start(job, now)
	if err != nil {
		t.Fatalf("start %s: %v", job, err)
	}
	return acts
}
