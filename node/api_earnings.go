package node

import (
	"context"
	"fmt"
	"math/big"
	"sort"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// The owner's and the renter's money, read from what this node itself
// holds: its own feed (the provider's settlements are appended to it
// synchronously, before the renter hears the charge; the renter's leases
// and outcomes are journaled to it), its job records, and the scheduler
// for leases still running. Nothing here waits for replication or for the
// reputation pass's cache, so a figure includes what was just paid.

// PeriodParams choose the UTC days a report covers: today and the days
// before it.
type PeriodParams struct {
	Days int `json:"days,omitempty" doc:"UTC days, today included; default 7, at most 366"`
}

// Validate refuses a period it would otherwise have to change silently.
func (p PeriodParams) Validate() error {
	if p.Days < 0 || p.Days > 366 {
		return fmt.Errorf("days %d: use 1 to 366 (0 means the default, 7)", p.Days)
	}
	return nil
}

// maxPeriod bounds the days a report lists one by one: a balance reads
// all time, and lists only the days with money.
const maxPeriod = 367 * 24 * time.Hour

// from is the period's first instant: midnight UTC, days-1 days before
// now's day.
func (p PeriodParams) from(now time.Time) time.Time {
	d := p.Days
	if d == 0 {
		d = 7
	}
	y, m, day := now.UTC().Date()
	return time.Date(y, m, day-(d-1), 0, 0, 0, 0, time.UTC)
}

// EarningsJob is one lease this node earned on as a provider.
type EarningsJob struct {
	Day        string          `json:"day" doc:"UTC day of its settlement (today for one still running)"`
	JobID      string          `json:"job_id"`
	Lease      string          `json:"lease,omitempty" doc:"CID of the co-signed lease; absent while it runs"`
	Renter     string          `json:"renter"`
	Tier       auction.Tier    `json:"tier"`
	GPUs       int             `json:"gpus"`
	GPUSeconds int64           `json:"gpu_s" doc:"GPU-seconds billed: the charge divided by the lease price, to the second (exact for prices of at least 0.0036 credits per GPU-hour); so far, for a lease still running"`
	Earned     auction.Credits `json:"earned" doc:"micro-credits (auction.Credits; 1 credit = 1000000): the settlement's charge; 0 while running"`
	Settled    bool            `json:"settled"`
}

// EarningsDay is one UTC day of a provider's report.
type EarningsDay struct {
	Day         string          `json:"day"`
	Earned      auction.Credits `json:"earned" doc:"micro-credits"`
	LeasedGPUS  int64           `json:"leased_gpu_s"`
	OfferedGPUS int64           `json:"offered_gpu_s" doc:"GPU-seconds on sale (offered, inside its windows), as this node recorded them"`
	FillBP      *int64          `json:"fill_bp,omitempty" doc:"leased over offered GPU-seconds in basis points (10000 = 100%); absent when nothing was recorded offered"`
}

// EarningsResult is ledger_earnings' result.
type EarningsResult struct {
	From         time.Time       `json:"from"`
	To           time.Time       `json:"to"`
	Earned       auction.Credits `json:"earned" doc:"micro-credits (auction.Credits; 1 credit = 1000000) settled in the period"`
	LeasedGPUS   int64           `json:"leased_gpu_s" doc:"GPU-seconds leased, on the days offered time was recorded"`
	OfferedGPUS  int64           `json:"offered_gpu_s"`
	FillBP       *int64          `json:"fill_bp,omitempty" doc:"leased_gpu_s / offered_gpu_s in basis points; absent when nothing was recorded offered"`
	OfferedSince *time.Time      `json:"offered_since,omitempty" doc:"when this node began recording offered GPU time: the fill rate counts from then"`
	Days         []EarningsDay   `json:"days"`
	Jobs         []EarningsJob   `json:"jobs"`
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

func registerEarningsAPI(s *rpc.Server, n *Node) {
	rpc.Register(s, "ledger_earnings", rpc.MethodDoc{
		Summary:     "What this node earned as a provider: per UTC day and per lease (job, renter, GPU-seconds, micro-credits earned), and the fill rate: leased over offered GPU-seconds.",
		Description: "From this node's own settlements and, for leases still running, its scheduler. Offered GPU-time is what this node recorded (offered_since says from when).",
		ParamNames:  []string{"days"},
	}, func(ctx context.Context, p PeriodParams) (EarningsResult, error) {
		return n.earnings(p.from(time.Now()), time.Now())
	})
	rpc.Register(s, "ledger_spend", rpc.MethodDoc{
		Summary:     "What this node spent as a renter: per job name and per UTC day, with each lease, in micro-credits.",
		Description: "Each lease counts its provider's settlement once replicated, before that the charge the provider reported at the job's end, and before that the vouchers signed (source says which).",
		ParamNames:  []string{"days"},
	}, func(ctx context.Context, p PeriodParams) (SpendResult, error) {
		return n.spend(p.from(time.Now()), time.Now())
	})
}

// ownFeed is what this node's own feed says about money.
type ownFeed struct {
	leases      map[string]*auction.Lease // lease CID -> lease
	leaseOrder  []string
	settlements []settledAt                // in feed order
	vouchers    map[string]auction.Credits // lease CID -> the outcome's voucher total
}

type settledAt struct {
	s    ledger.Settlement
	time int64
}

func (n *Node) readOwnFeed() (ownFeed, error) {
	f := ownFeed{leases: map[string]*auction.Lease{}, vouchers: map[string]auction.Credits{}}
	self := n.host.ID().String()
	h, ok, err := n.ledger.Head(self)
	if err != nil || !ok {
		return f, err
	}
	err = n.ledger.Walk(self, 1, h.Seq, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		switch e.Type {
		case ledger.TypeLease:
			if l, sl, err := auction.DecodeLeaseUnverified(e.Payload); err == nil {
				cid := sl.CID().String()
				f.leases[cid] = l
				f.leaseOrder = append(f.leaseOrder, cid)
			}
		case ledger.TypeSettlement:
			if s, err := ledger.DecodePayload[ledger.Settlement](e.Payload); err == nil {
				f.settlements = append(f.settlements, settledAt{*s, e.Time})
			}
		case ledger.TypeOutcome:
			if o, err := ledger.DecodePayload[ledger.Outcome](e.Payload); err == nil && len(o.Voucher) > 0 {
				if v, _, err := ledger.DecodeSignedVoucher(o.Voucher); err == nil {
					f.vouchers[o.Lease] = v.Total
				}
			}
		}
		return nil
	})
	return f, err
}

// billedGPUSeconds is the GPU-time a charge pays for at price per
// GPU-hour: floor(charged × 3600 / price). The charge is price × GPUs ×
// seconds / 3600 rounded up (sched.Cost), so this is exact while a
// GPU-second costs at least a micro-credit.
func billedGPUSeconds(charged, price auction.Credits) int64 {
	if charged <= 0 || price <= 0 {
		return 0
	}
	s := new(big.Int).Mul(big.NewInt(int64(charged)), big.NewInt(3600))
	return s.Quo(s, big.NewInt(int64(price))).Int64()
}

// fillBP is leased over offered in basis points, from integers; nil when
// nothing was offered.
func fillBP(leased, offered int64) *int64 {
	if offered <= 0 {
		return nil
	}
	f := new(big.Int).Mul(big.NewInt(leased), big.NewInt(10000))
	v := f.Quo(f, big.NewInt(offered)).Int64()
	return &v
}

func (n *Node) earnings(from, to time.Time) (EarningsResult, error) {
	res := EarningsResult{From: from, To: to.UTC(), Days: []EarningsDay{}, Jobs: []EarningsJob{}}
	f, err := n.readOwnFeed()
	if err != nil {
		return res, err
	}
	self := n.host.ID().String()
	settled := map[string]bool{} // job ID + renter + start of each settled lease
	for _, st := range f.settlements {
		l := f.leases[st.s.Lease]
		if l == nil || l.Provider != self {
			continue
		}
		settled[leaseKey(l)] = true
		if st.time < from.Unix() {
			continue
		}
		paid := st.s.Paid()
		res.Jobs = append(res.Jobs, EarningsJob{Day: time.Unix(st.time, 0).UTC().Format(dayLayout), JobID: l.JobID, Lease: st.s.Lease,
			Renter: l.Renter, Tier: l.Tier, GPUs: l.GPUs, GPUSeconds: billedGPUSeconds(paid, l.Price), Earned: paid, Settled: true})
	}
	if n.providerJobs != nil {
		today := to.UTC().Format(dayLayout)
		for _, in := range n.providerJobs.Leases(to) {
			if in.State != sched.Started || settled[leaseKey(&in.Lease)] {
				continue // not running, or settled and not yet released
			}
			res.Jobs = append(res.Jobs, EarningsJob{Day: today, JobID: in.Lease.JobID, Renter: in.Lease.Renter, Tier: in.Lease.Tier,
				GPUs: in.Lease.GPUs, GPUSeconds: sched.BilledSeconds(in.Ran) * int64(in.Lease.GPUs)})
		}
	}
	offered, err := n.offeredDays()
	if err != nil {
		return res, err
	}
	days := map[string]*EarningsDay{}
	dayOf := func(d string) *EarningsDay {
		if e, ok := days[d]; ok {
			return e
		}
		e := &EarningsDay{Day: d, OfferedGPUS: offered[d].GPUSeconds}
		days[d] = e
		return e
	}
	for d := from; d.Before(to) && to.Sub(from) <= maxPeriod; d = d.AddDate(0, 0, 1) { // every day of the period, those without a job too
		dayOf(d.Format(dayLayout))
	}
	for _, j := range res.Jobs {
		e := dayOf(j.Day)
		e.Earned += j.Earned
		e.LeasedGPUS += j.GPUSeconds
		res.Earned += j.Earned
	}
	var since int64
	for _, o := range offered {
		if since == 0 || o.From < since {
			since = o.From
		}
	}
	if since > 0 {
		t := time.Unix(since, 0).UTC()
		res.OfferedSince = &t
	}
	for _, e := range days {
		e.FillBP = fillBP(e.LeasedGPUS, e.OfferedGPUS)
		if _, recorded := offered[e.Day]; recorded {
			// Only days with a record count toward the period's rate:
			// leases before the node recorded would read as over 100%.
			res.LeasedGPUS += e.LeasedGPUS
			res.OfferedGPUS += e.OfferedGPUS
		}
		res.Days = append(res.Days, *e)
	}
	sort.Slice(res.Days, func(i, k int) bool { return res.Days[i].Day < res.Days[k].Day })
	sort.SliceStable(res.Jobs, func(i, k int) bool { return res.Jobs[i].Day < res.Jobs[k].Day })
	res.FillBP = fillBP(res.LeasedGPUS, res.OfferedGPUS)
	return res, nil
}

func leaseKey(l *auction.Lease) string {
	return fmt.Sprintf("%s\x00%s\x00%d", l.JobID, l.Renter, l.Start)
}
