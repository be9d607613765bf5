package main

import (
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// TestJobExplainListsEveryReasonAndCountsAddUp: job explain prints every
// check a rejected offer fails, not only the first; its counts add up
// (considered = feasible + rejected, and the funnel's removals are the
// rejected); the providers the job left are listed apart, outside the
// count; and the suggested change closes it.
func TestJobExplainListsEveryReasonAndCountsAddUp(t *testing.T) {
	four := []auction.Failure{
		{Check: auction.CheckPrice, Reason: auction.ReasonFloorAboveMax, Detail: "bronze floor 1.2/GPU-h, above max_price 1"},
		{Check: auction.CheckRegion, Reason: auction.ReasonRegion, Detail: "offer in eu, placement.regions [na]"},
		{Check: auction.CheckGPUs, Reason: auction.ReasonTooFewGPUs, Detail: "offer has 2xH100 (85 GB); the job wants 4"},
		{Check: auction.CheckHost, Reason: auction.ReasonCPUs, Detail: "offer has 32 CPUs and 274 GB; the job wants 64 and 32 GB"},
	}
	ex := renter.Explain{
		Considered: 3,
		Funnel:     []auction.FunnelStep{{Check: auction.CheckPrice, Removed: 1}, {Check: auction.CheckRegion, Removed: 1}},
		Rejected: []auction.Rejection{
			{Provider: "left-one", Check: "left", Reason: "this job left it: preempted"},
			{Provider: "four-reasons", Check: auction.CheckPrice, Reason: auction.ReasonFloorAboveMax, Detail: four[0].Detail, All: four},
			{Provider: "one-reason", Check: auction.CheckRegion, Reason: auction.ReasonRegion, All: four[1:2]},
		},
		Relax: &auction.Relaxation{Change: "add eu to placement.regions", Admits: 1},
	}
	var b strings.Builder
	printExplain(&b, ex)
	out := b.String()
	for _, want := range []string{
		"3 offers considered: 1 feasible, 2 rejected\n",
		"rejected offers, every check each fails (2 of 2 listed):\n",
		"  - four-reasons:\n" +
			"      price: price floor above max_price: bronze floor 1.2/GPU-h, above max_price 1\n" +
			"      region: outside placement.regions: offer in eu, placement.regions [na]\n" +
			"      gpus: fewer GPUs than resources.gpus: offer has 2xH100 (85 GB); the job wants 4\n" +
			"      host: fewer host CPUs than resources.cpus: offer has 32 CPUs and 274 GB; the job wants 64 and 32 GB\n",
		"not considered, 1 provider(s) this job left:\n  - left-one: this job left it: preempted (left)\n",
		"suggestion: add eu to placement.regions to admit 1 more offer(s)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("job explain lacks %q:\n%s", want, out)
		}
	}
	// One line per rejected offer in the list, as many as the rejections.
	if n := strings.Count(out, "\n  - ") - 1; n != 2 {
		t.Errorf("%d rejected offers listed, want 2:\n%s", n, out)
	}
}
