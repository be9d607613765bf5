package provider_test

import (
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/provider"
)

// A lease from quote to release, as node's adapters drive it: the caller
// keeps the clock and carries out the actions.
func Example() {
	now := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	s := provider.New()
	s.SetAvailability(attest.Availability{
		Inventory: attest.Inventory{GPUs: []attest.GPU{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}},
		Available: []int{0, 1},
	}, now)

	// The quote names GPUs; the award claims exactly those.
	gpus, _ := s.Plan(1, auction.Silver, provider.Span{Start: now, End: now.Add(time.Hour)}, now)
	l := &auction.Lease{JobID: "job-1", Renter: "renter", Tier: auction.Silver, Price: 2_000_000, GPUs: 1,
		Start: now.Unix(), End: now.Add(time.Hour).Unix(), BillingSec: 600}
	if _, err := s.Claim(l, gpus, now); err != nil {
		fmt.Println(err)
	}
	acts, _ := s.Start("job-1", now.Add(time.Second))
	fmt.Println(acts[0].Kind, acts[0].JobID)
	s.Running("job-1", now.Add(2*time.Second))
	s.PaidTotal("job-1", provider.IntervalPrice(l)) // the first voucher: ten minutes

	// No second voucher: paused after the grace, stopped after the patience.
	for t := s.Due(); !t.IsZero(); t = s.Due() {
		for _, a := range s.Tick(t) {
			fmt.Println(t.Sub(now), a.Kind, a.Message())
		}
	}
	s.Release("job-1", now.Add(time.Hour))
	st, _ := s.Ended("job-1")
	fmt.Println(st)
	// Output:
	// launch job-1
	// 10m32.000000001s pause no voucher covers the time run
	// 30m32.000000002s stop-unpaid no voucher covers the time run
	// ended
}
