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
// for leases still running. Earnings wait for nothing. Spend reads the
// provider's settlement from the reputation pass (cached 5 s, and only
// once it has replicated); until it is there the charge the provider
// reported in the job's exit event stands in for it (earnings_spend.go),
// so either figure includes what was just paid.

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

// maxPeriod bounds the days a report lists one by one.
const maxPeriod = (MaxReportDays + 1) * 24 * time.Hour

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

// EarningsDay is one UTC day of a provider's report.
type EarningsDay struct {
	Day         string          `json:"day"`
	Earned      auction.Credits `json:"earned" doc:"micro-credits"`
	LeasedGPUS  int64           `json:"leased_gpu_s" doc:"GPU-seconds of leases that fell on this day (a lease over midnight counts on both days)"`
	OfferedGPUS int64           `json:"offered_gpu_s" doc:"GPU-seconds on sale (offered, inside its windows), as this node recorded them"`
	FillBP      *int64          `json:"fill_bp,omitempty" doc:"leased over offered GPU-seconds in basis points (10000 = 100%, at most: a lease runs on while its GPUs are not offered, the offer paused or the node stopped); absent when nothing was recorded offered"`
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
	self        string                     // this node's peer ID, the feed's author
	leases      map[string]*auction.Lease  // lease CID -> lease
	leaseOrder  []string                   // each lease CID once, in the order first journaled
	settlements []settledAt                // proven; one per lease, its last, where the first was
	settledAt   map[string]int             // lease CID -> its index in settlements
	vouchers    map[string]auction.Credits // lease CID -> the outcome's voucher total
}

type settledAt struct {
	s    ledger.Settlement
	time int64
}

func newOwnFeed(self string) ownFeed {
	return ownFeed{self: self, leases: map[string]*auction.Lease{}, settledAt: map[string]int{}, vouchers: map[string]auction.Credits{}}
}

// add reads one entry of the feed, in feed order. A lease journaled again
// (the provider at the award, the renter at the start) is one lease; a
// lease settled again counts its last settlement only, as the reputation
// pass does.
func (f *ownFeed) add(e *ledger.Entry) {
	switch e.Type {
	case ledger.TypeLease:
		if l, sl, err := auction.DecodeLeaseUnverified(e.Payload); err == nil {
			cid := sl.CID().String()
			if f.leases[cid] == nil {
				f.leaseOrder = append(f.leaseOrder, cid)
			}
			f.leases[cid] = l
		}
	case ledger.TypeSettlement:
		s, err := ledger.DecodePayload[ledger.Settlement](e.Payload)
		if err != nil || s.Lease == "" || !s.Proven(f.self) { // only what every other node counts too
			return
		}
		st := settledAt{*s, e.Time}
		if i, ok := f.settledAt[s.Lease]; ok {
			f.settlements[i] = st // settled again: the last one stands
			return
		}
		f.settledAt[s.Lease] = len(f.settlements)
		f.settlements = append(f.settlements, st)
	case ledger.TypeOutcome:
		if o, err := ledger.DecodePayload[ledger.Outcome](e.Payload); err == nil && len(o.Voucher) > 0 {
			if v, _, err := ledger.DecodeSignedVoucher(o.Voucher); err == nil {
				f.vouchers[o.Lease] = v.Total
			}
		}
	}
}

// readOwnFeed walks this node's own feed once.
func (n *Node) readOwnFeed() (ownFeed, error) {
	self := n.host.ID().String()
	f := newOwnFeed(self)
	h, ok, err := n.ledger.Head(self)
	if err != nil || !ok {
		return f, err
	}
	err = n.ledger.Walk(self, 1, h.Seq, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		f.add(e)
		return nil
	})
	return f, err
}

// fillBP is leased over offered in basis points, from integers, at most
// 10000 (a lease runs on while its GPUs are not offered: the offer
// paused, or the node stopped and not recording); nil when nothing was
// offered.
func fillBP(leased, offered int64) *int64 {
	if offered <= 0 {
		return nil
	}
	f := new(big.Int).Mul(big.NewInt(leased), big.NewInt(10000))
	v := min(f.Quo(f, big.NewInt(offered)).Int64(), 10000)
	return &v
}

// leaseRun is when l held its GPUs: from its start to end, at most to the
// lease's end. The feed holds no run times (a settlement says only what
// was charged, capped by the vouchers), so the lease's own window and the
// settlement's time bound it.
func leaseRun(l *auction.Lease, end time.Time) (time.Time, time.Time) {
	if e := time.Unix(l.End, 0); end.After(e) {
		end = e
	}
	return time.Unix(l.Start, 0), end
}

// gpuSeconds is gpus GPUs over [from, to), in whole seconds.
func gpuSeconds(from, to time.Time, gpus int) int64 {
	if !to.After(from) {
		return 0
	}
	return int64(to.Sub(from)/time.Second) * int64(gpus)
}

func (n *Node) earnings(from, to time.Time) (EarningsResult, error) {
	f, err := n.readOwnFeed()
	if err != nil {
		return EarningsResult{From: from, To: to.UTC(), Days: []EarningsDay{}, Jobs: []EarningsJob{}}, err
	}
	var active []sched.Info
	if n.providerJobs != nil {
		active = n.providerJobs.Leases(to)
	}
	offered, err := n.offeredDays()
	if err != nil {
		return EarningsResult{From: from, To: to.UTC(), Days: []EarningsDay{}, Jobs: []EarningsJob{}}, err
	}
	return earningsOf(f, active, offered, from, to), nil
}

// earningsOf is the provider's report over [from, to): its settled leases
// from its own feed f, those still running from the scheduler (active),
// and the offered time it recorded. Each lease's GPU-time is spread over
// the UTC days it ran, as offered time is.
func earningsOf(f ownFeed, active []sched.Info, offered map[string]offeredDay, from, to time.Time) EarningsResult {
	res := EarningsResult{From: from, To: to.UTC(), Days: []EarningsDay{}, Jobs: []EarningsJob{}}
	var spans []daySpan
	run := func(l *auction.Lease, end time.Time) int64 {
		start, end := leaseRun(l, end)
		spans = append(spans, accrue(maxTime(start, from), minTime(end, to), l.GPUs)...)
		return gpuSeconds(start, end, l.GPUs)
	}
	settled := map[string]bool{} // job ID + renter + start of each settled lease
	for _, st := range f.settlements {
		l := f.leases[st.s.Lease]
		if l == nil || l.Provider != f.self {
			continue
		}
		settled[leaseKey(l)] = true
		if st.time < from.Unix() {
			continue // its run ended at its settlement, before the period
		}
		at := time.Unix(st.time, 0)
		res.Jobs = append(res.Jobs, EarningsJob{Day: at.UTC().Format(dayLayout), JobID: l.JobID, Lease: st.s.Lease,
			Renter: l.Renter, Tier: l.Tier, GPUs: l.GPUs, GPUSeconds: run(l, at), Earned: st.s.Paid(), Settled: true})
	}
	today := to.UTC().Format(dayLayout)
	for _, in := range active {
		if in.State != sched.Started || settled[leaseKey(&in.Lease)] {
			continue // not running, or settled and not yet released
		}
		res.Jobs = append(res.Jobs, EarningsJob{Day: today, JobID: in.Lease.JobID, Renter: in.Lease.Renter, Tier: in.Lease.Tier,
			GPUs: in.Lease.GPUs, GPUSeconds: run(&in.Lease, to)})
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
		dayOf(j.Day).Earned += j.Earned
		res.Earned += j.Earned
	}
	for _, s := range spans {
		dayOf(s.Day).LeasedGPUS += s.GPUSeconds
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
	return res
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func leaseKey(l *auction.Lease) string {
	return fmt.Sprintf("%s\x00%s\x00%d", l.JobID, l.Renter, l.Start)
}
