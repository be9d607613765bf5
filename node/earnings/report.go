package earnings

import (
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// The owner's and the renter's money, as reports: what a node earned as a
// provider and spent as a renter, per UTC day and per lease. The node
// gathers the records (its own feed, its job records, its scheduler, the
// offered time it sampled); this package only sums them.

// PeriodParams choose the UTC days a report covers: today and the days
// before it.
type PeriodParams struct {
	Days int `json:"days,omitempty" doc:"UTC days, today included; default 7, at most 366"` // 366: MaxReportDays
}

// MaxReportDays is the longest period a report covers, in UTC days: the
// one limit the API, the CLI and the docs state.
const MaxReportDays = 366

// Validate refuses a period it would otherwise have to change silently.
func (p PeriodParams) Validate() error {
	if p.Days < 0 || p.Days > MaxReportDays {
		return fmt.Errorf("days %d: use 1 to %d (0 means the default, 7)", p.Days, MaxReportDays)
	}
	return nil
}

// MaxPeriod bounds the days a report lists one by one.
const MaxPeriod = (MaxReportDays + 1) * 24 * time.Hour

// From is the period's first instant: midnight UTC, days-1 days before
// now's day.
func (p PeriodParams) From(now time.Time) time.Time {
	d := p.Days
	if d == 0 {
		d = 7
	}
	y, m, day := now.UTC().Date()
	return time.Date(y, m, day-(d-1), 0, 0, 0, 0, time.UTC)
}

// Job is one lease this node earned on as a provider.
type Job struct {
	Day        string          `json:"day" doc:"UTC day of its settlement (today for one still running); its GPU-time counts on the days it ran"`
	JobID      string          `json:"job_id"`
	Lease      string          `json:"lease,omitempty" doc:"CID of the co-signed lease; absent while it runs"`
	Renter     string          `json:"renter"`
	Tier       auction.Tier    `json:"tier"`
	GPUs       int             `json:"gpus"`
	GPUSeconds int64           `json:"gpu_s" doc:"GPU-seconds leased: its GPUs from the lease's start to its settlement, or for a lease still running to now, at most to the lease's end"`
	Earned     auction.Credits `json:"earned" doc:"micro-credits (auction.Credits; 1 credit = 1000000): the settlement's charge; 0 while running"`
	Settled    bool            `json:"settled"`
}

// Day is one UTC day of a provider's report.
type Day struct {
	Day         string          `json:"day"`
	Earned      auction.Credits `json:"earned" doc:"micro-credits"`
	LeasedGPUS  int64           `json:"leased_gpu_s" doc:"GPU-seconds of leases that fell on this day (a lease over midnight counts on both days)"`
	OfferedGPUS int64           `json:"offered_gpu_s" doc:"GPU-seconds on sale (offered, inside its windows), as this node recorded them"`
	FillBP      *int64          `json:"fill_bp,omitempty" doc:"leased over offered GPU-seconds in basis points (10000 = 100%, at most: a lease runs on while its GPUs are not offered, the offer paused or the node stopped); absent when nothing was recorded offered"`
}

// Result is ledger_earnings' result.
type Result struct {
	From         time.Time       `json:"from"`
	To           time.Time       `json:"to"`
	Earned       auction.Credits `json:"earned" doc:"micro-credits (auction.Credits; 1 credit = 1000000) settled in the period"`
	LeasedGPUS   int64           `json:"leased_gpu_s" doc:"GPU-seconds leased, on the days offered time was recorded"`
	OfferedGPUS  int64           `json:"offered_gpu_s"`
	FillBP       *int64          `json:"fill_bp,omitempty" doc:"leased_gpu_s / offered_gpu_s in basis points; absent when nothing was recorded offered"`
	OfferedSince *time.Time      `json:"offered_since,omitempty" doc:"when this node began recording offered GPU time: the fill rate counts from then"`
	Days         []Day           `json:"days"`
	Jobs         []Job           `json:"jobs"`
}

// SpendLease is one lease this node paid for as a renter.
type SpendLease struct {
	Day      string          `json:"day" doc:"UTC day it was settled, or ended, or (still running) started"`
	Name     string          `json:"name" doc:"the job spec's name"`
	JobID    string          `json:"job_id"`
	Lease    string          `json:"lease"`
	Provider string          `json:"provider"`
	Spent    auction.Credits `json:"spent" doc:"micro-credits (auction.Credits; 1 credit = 1000000)"`
	// Source says which record the figure is: the provider's settlement
	// (replicated), its charge as it reported it at the job's end (checked
	// against this node's bound), or, with neither, the vouchers this node
	// signed (the most the provider can take; it refunds the rest).
	Source string `json:"source" doc:"settlement, reported charge or vouchers"`
}

// SpendName sums one job name's leases.
type SpendName struct {
	Name   string          `json:"name"`
	Jobs   int             `json:"jobs"`
	Leases int             `json:"leases"`
	Spent  auction.Credits `json:"spent" doc:"micro-credits"`
}

// SpendDay sums one UTC day.
type SpendDay struct {
	Day   string          `json:"day"`
	Spent auction.Credits `json:"spent" doc:"micro-credits"`
}

// SpendResult is ledger_spend's result.
type SpendResult struct {
	From   time.Time       `json:"from"`
	To     time.Time       `json:"to"`
	Spent  auction.Credits `json:"spent" doc:"micro-credits (auction.Credits; 1 credit = 1000000) in the period"`
	ByName []SpendName     `json:"by_name"`
	Days   []SpendDay      `json:"days"`
	Leases []SpendLease    `json:"leases"`
}
