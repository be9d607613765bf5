package console

import (
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// The RPC results as the pages read them: only the fields shown, under
// the RPC's JSON names (node/api_*.go), so that a renamed field shows up
// as a test failure rather than as a silently empty cell.

type nodeInfo struct {
	PeerID       string    `json:"peer_id"`
	Addrs        []string  `json:"addrs"`
	Version      string    `json:"version"`
	Network      string    `json:"network"`
	StartedAt    time.Time `json:"started_at"`
	UptimeSec    float64   `json:"uptime_s"`
	Reachability string    `json:"reachability"`
	Peers        int       `json:"peers"`
}

type balance struct {
	Faucet  auction.Credits `json:"faucet"`
	Earned  auction.Credits `json:"earned"`
	Spent   auction.Credits `json:"spent"`
	Balance auction.Credits `json:"balance"`
}

type gpuLease struct {
	JobID  string          `json:"job_id"`
	Renter string          `json:"renter"`
	Tier   string          `json:"tier"`
	State  string          `json:"state"`
	Price  auction.Credits `json:"price"`
	Start  time.Time       `json:"start"`
	Until  time.Time       `json:"until"`
}

type gpuStatus struct {
	attest.GPU
	Offered   bool      `json:"offered"`
	Withdrawn string    `json:"withdrawn"`
	Stopping  string    `json:"stopping"`
	Lease     *gpuLease `json:"lease"`
}

type offerView struct {
	Provider      string                     `json:"provider"`
	Seq           uint64                     `json:"seq"`
	GPUs          []auction.GPU              `json:"gpus"`
	GPUCount      int                        `json:"gpu_count"`
	Simulated     bool                       `json:"simulated"`
	Region        auction.Region             `json:"region"`
	Prices        map[string]auction.Credits `json:"prices"`
	AvailableForS int64                      `json:"available_for_s"`
	ExpiresAt     time.Time                  `json:"expires_at"`
	// InEffect is market_offers' price in effect per tier: peaks and
	// surge applied, with why.
	InEffect map[string]priceInEffect `json:"in_effect"`
}

type priceInEffect struct {
	Base  auction.Credits `json:"base"`
	Price auction.Credits `json:"price"`
	Why   string          `json:"why"`
}

type offerShow struct {
	Offered  bool        `json:"offered"`
	Reason   string      `json:"reason"`
	Offer    *offerView  `json:"offer"`
	GPUs     []gpuStatus `json:"gpus"`
	GPUError string      `json:"gpu_error"`
}

type marketOffers struct {
	Offers  []offerView      `json:"offers"`
	Explain *auction.Explain `json:"explain"`
}

type jobRecord struct {
	ID        string           `json:"id"`
	Name      string           `json:"name"`
	State     string           `json:"state"`
	Created   time.Time        `json:"created"`
	Updated   time.Time        `json:"updated"`
	Provider  string           `json:"provider"`
	Price     auction.Credits  `json:"lease_price"`
	GPUs      int              `json:"gpus"`
	Simulated bool             `json:"simulated"`
	ExitCode  *int             `json:"exit_code"`
	Error     string           `json:"error"`
	Attempts  int              `json:"attempts"`
	Paid      auction.Credits  `json:"paid_total"`
	Charged   *auction.Credits `json:"charged"`
	Refunded  auction.Credits  `json:"refunded"`
	StartedAt *time.Time       `json:"started_at"`
	EndedAt   *time.Time       `json:"ended_at"`
	Verified  string           `json:"verified"`
	Outputs   string           `json:"outputs"` // the outputs' CID, once there are some (outputs.go)
	// PriceWhy is the clearing rule and numbers that set Price.
	PriceWhy *renter.Clearing `json:"price_why"`
	// Array is the array this job is a shard of; ArrayView is set on an
	// array's own record instead (arrays.go).
	Array     string     `json:"array"`
	ArrayView *arrayView `json:"array_view"`
}

// explainCounts are an explain's counts that add up: Considered =
// Feasible + Rejected (the funnel's removals); Checked are the listed
// rejections by a check, apart from the providers the job left.
type explainCounts struct {
	Feasible, Rejected int
	Checked            []auction.Rejection
}

func countExplain(ex jobExplain) explainCounts {
	var c explainCounts
	for _, f := range ex.Funnel {
		c.Rejected += f.Removed
	}
	c.Feasible = ex.Considered - c.Rejected
	for _, r := range ex.Rejected {
		if r.Check != "left" && r.Check != "excluded" { // node's withLeft
			c.Checked = append(c.Checked, r)
		}
	}
	return c
}

// failures is every check r's offer fails (its All, or its one check).
func failures(r auction.Rejection) []auction.Failure {
	if len(r.All) > 0 {
		return r.All
	}
	return []auction.Failure{{Check: r.Check, Reason: r.Reason, Detail: r.Detail}}
}

type earningsDay struct {
	Day         string          `json:"day"`
	Earned      auction.Credits `json:"earned"`
	LeasedGPUS  int64           `json:"leased_gpu_s"`
	OfferedGPUS int64           `json:"offered_gpu_s"`
	FillBP      *int64          `json:"fill_bp"`
}

// earningsJob is one lease earned on, as ledger_earnings lists it.
type earningsJob struct {
	Day        string          `json:"day"`
	JobID      string          `json:"job_id"`
	Lease      string          `json:"lease"`
	Renter     string          `json:"renter"`
	Tier       string          `json:"tier"`
	GPUs       int             `json:"gpus"`
	GPUSeconds int64           `json:"gpu_s"`
	Earned     auction.Credits `json:"earned"`
	Settled    bool            `json:"settled"`
}

type earnings struct {
	From        time.Time       `json:"from"`
	To          time.Time       `json:"to"`
	Earned      auction.Credits `json:"earned"`
	LeasedGPUS  int64           `json:"leased_gpu_s"`
	OfferedGPUS int64           `json:"offered_gpu_s"`
	FillBP      *int64          `json:"fill_bp"`
	Days        []earningsDay   `json:"days"`
	Jobs        []earningsJob   `json:"jobs"`
}

// jobExplain is the auction's record, as job_explain returns it.
type jobExplain = renter.Explain
