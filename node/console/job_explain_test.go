package console

import (
	"net/http"
	"testing"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// TestJobPageSaysWhyAsTheCLIDoes: the job page shows what the lease costs
// and why, every check each rejected offer fails with its numbers,
// counts that add up, and the change that admits the most.
func TestJobPageSaysWhyAsTheCLIDoes(t *testing.T) {
	why := "1.5/GPU-h: the runner-up's price, the second-score rule; your max 2; the winner asked 0.6"
	f := &fakeCaller{results: map[string]any{
		"job_status": jobRecord{ID: "j1", Name: "train", State: "completed", Provider: "p1", Price: 1_500_000,
			PriceWhy: &renter.Clearing{Price: 1_500_000, Why: why}},
		"job_explain": jobExplain{Considered: 3, Winner: "p1", ClearingPrice: 1_500_000, Rule: renter.RuleSecondPrice,
			Clearing: &renter.Clearing{Price: 1_500_000, Why: why},
			Funnel:   []auction.FunnelStep{{Check: auction.CheckPrice, Removed: 1}},
			Rejected: []auction.Rejection{
				{Provider: "left-one", Check: "left", Reason: "this job left it"},
				{Provider: "p3", Check: auction.CheckPrice, Reason: auction.ReasonFloorAboveMax, All: []auction.Failure{
					{Check: auction.CheckPrice, Reason: auction.ReasonFloorAboveMax, Detail: "silver floor 2.4/GPU-h in effect (peak x2 until 18:00 UTC; base 1.2), above max_price 2"},
					{Check: auction.CheckRegion, Reason: auction.ReasonRegion, Detail: "offer in na, placement.regions [eu]"},
				}},
			},
			Relax: &auction.Relaxation{Change: "raise max_price to 2.4", Admits: 1}},
		"job_logs": jobLogs{},
	}}
	c := testConsole(t, f, nil)
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/jobs/j1", nil, withCookie(ck))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	mustContain(t, w.Body.String(),
		`<small id="price-why">1.5/GPU-h: the runner-up&#39;s price, the second-score rule; your max 2; the winner asked 0.6</small>`,
		"3 offer(s) considered: 2 feasible, 1 rejected.",
		"Rejected (1 of 1 listed), every check each fails:",
		"price: silver floor 2.4/GPU-h in effect (peak x2 until 18:00 UTC; base 1.2), above max_price 2; region: offer in na, placement.regions [eu]",
		`<li id="relax">Suggestion: raise max_price to 2.4 to admit 1 more offer(s).</li>`,
		"(second-price): 1.5/GPU-h: the runner-up&#39;s price")
}
