package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/earnings"
	"github.com/gleaner-net/gleaner/node/renting"
)

// decodeCLI runs a --json command on n and decodes its output into v.
func decodeCLI(t *testing.T, n *rnode, v any, args ...string) {
	t.Helper()
	r := n.cli(t, append(args, "--json")...)
	mustOK(t, r, strings.Join(args, " "))
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("%s --json: %v\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

// The owner's and the renter's views of the same jobs, between two real
// daemons with the demo image: offer show names the job each GPU is
// leased to while it runs; right after the jobs the renter's balance is
// its whole spend (not the part whose settlement had replicated); spend
// groups the leases by the spec's name; the provider's earnings show each
// job at the amount the renter spent on it, and still do after the
// provider restarts, with the offered time it recorded until its stop.
func TestEarningsSpendAndOfferShow(t *testing.T) {
	requireDocker(t)
	began := time.Now()
	p := provider(t, "provider", "2xRTX4090")
	rn := startRenter(t, p)
	ns := []*rnode{p, rn}
	a := rn.submit(t, demoSpec("train", "silver", "2s", 4, 0), "")
	b := rn.submit(t, demoSpec("train", "silver", "2s", 4, 0), "")
	for _, id := range []string{a, b} {
		rn.waitJob(t, id, 60*time.Second, "running", func(j renting.JobRecord) bool { return j.State == renting.StateRunning }, p)
	}

	var show node.OfferShowResult
	decodeCLI(t, p, &show, "offer", "show")
	leasedTo := map[string]bool{}
	for _, g := range show.GPUs {
		if g.Lease != nil && g.Lease.State == "running" && g.Lease.Tier == auction.Silver && g.Lease.Until.After(time.Now()) {
			leasedTo[g.Lease.JobID] = true
		}
	}
	if !leasedTo[a] || !leasedTo[b] {
		t.Fatalf("offer show --json while %s and %s run: %+v", a, b, show.GPUs)
	}
	// The whole STATE cell (the table's last column): leased, so not free.
	var until time.Time
	for _, g := range show.GPUs {
		if g.Lease != nil && g.Lease.JobID == a {
			until = g.Lease.Until
		}
	}
	cell := "leased: job " + a + ", silver, running at 0.5 credits per GPU-hour, until " + until.Local().Format(time.DateTime) + "; offered"
	if r := p.cli(t, "offer", "show"); !hasLineEnding(r.stdout, "  "+cell) {
		t.Fatalf("offer show while %s runs, want a GPU's state %q:\n%s", a, cell, r.stdout)
	}

	var charged auction.Credits
	for _, id := range []string{a, b} {
		j := rn.waitJob(t, id, 90*time.Second, "completed with a charge", func(j renting.JobRecord) bool { return terminalState(j.State) }, p)
		if j.State != renting.StateCompleted || j.Charged == nil || *j.Charged <= 0 || j.ChargeDisputed {
			t.Fatalf("job %s: %+v\n%s", id, j, tails(ns))
		}
		charged += *j.Charged
	}
	// At once, no wait: the provider's settlements may not have reached
	// the renter yet, and the reputation pass caches for 5 s.
	var bal node.BalanceResult
	decodeCLI(t, rn, &bal, "ledger", "balance")
	var sp earnings.SpendResult
	decodeCLI(t, rn, &sp, "spend")
	if bal.Spent != charged || sp.Spent != charged || bal.Balance != node.FaucetCredits-charged || bal.SpentByJob["train"] != charged {
		t.Fatalf("right after the jobs: balance spent %d, spend %d, want both %d (the jobs' charges): %+v", bal.Spent, sp.Spent, charged, bal)
	}
	if len(sp.ByName) != 1 || sp.ByName[0].Name != "train" || sp.ByName[0].Jobs != 2 || sp.ByName[0].Leases != 2 || sp.ByName[0].Spent != charged {
		t.Fatalf("spend by name: %+v", sp.ByName)
	}
	today := time.Now().UTC().Format("2006-01-02")
	if len(sp.Days) != 7 || sp.Days[6].Day != today || sp.Days[6].Spent != charged {
		t.Fatalf("spend by day: %+v", sp.Days)
	}
	if r := rn.cli(t, "spend"); !strings.Contains(r.stdout, "train") || !strings.Contains(r.stdout, credits(charged)) {
		t.Fatalf("spend:\n%s", r.stdout)
	}
	if r := rn.cli(t, "ledger", "history"); !strings.Contains(r.stdout, "0.5 credits per GPU-hour") || !strings.Contains(r.stdout, "credits voucher total") {
		t.Fatalf("the renter's ledger history shows no amounts:\n%s", r.stdout)
	}

	spentOn := map[string]auction.Credits{}
	for _, l := range sp.Leases {
		spentOn[l.JobID] = l.Spent
	}
	earnedMatches := func(e earnings.Result) bool {
		got := 0
		for _, j := range e.Jobs {
			if j.Settled && j.Renter == rn.d.peerID && j.Earned == spentOn[j.JobID] && j.GPUs == 1 && j.GPUSeconds >= 2 && j.Day == today {
				got++
			}
		}
		return got == 2 && e.Earned == charged
	}
	var earn earnings.Result
	decodeCLI(t, p, &earn, "earnings", "--days", "1")
	if !earnedMatches(earn) || len(earn.Days) != 1 || earn.Days[0].Earned != charged {
		t.Fatalf("earnings: %+v, want both jobs at what the renter spent on each (%v)", earn, spentOn)
	}
	if r := p.cli(t, "earnings"); !strings.Contains(r.stdout, a) || !strings.Contains(r.stdout, credits(spentOn[a])) || !strings.Contains(r.stdout, "fill rate:") || !strings.Contains(r.stdout, "DAY (UTC)") {
		t.Fatalf("earnings:\n%s", r.stdout)
	}

	// Restarts are normal: the earnings are the provider's own feed, and
	// the offered time recorded until the stop is in node.db.
	p.restart(t, syscall.SIGTERM)
	decodeCLI(t, p, &earn, "earnings")
	if !earnedMatches(earn) {
		t.Fatalf("earnings after the provider's restart: %+v", earn)
	}
	if earn.OfferedSince == nil || earn.OfferedGPUS <= 0 || earn.FillBP == nil || earn.LeasedGPUS <= 0 {
		t.Fatalf("no offered time recorded before the restart: %+v", earn)
	}
	// Known without the code's formula: each job held one GPU for at
	// least its 2 s sleep; both GPUs were offered while they ran (a
	// second of sampling slack each), and at most since the test began.
	most := 2 * int64(time.Since(began)/time.Second)
	if earn.LeasedGPUS < 2*2 || earn.LeasedGPUS > earn.OfferedGPUS+2 || earn.OfferedGPUS > most {
		t.Fatalf("leased %d, offered %d GPU-seconds: want at least 4 leased, no more than offered, and at most %d offered", earn.LeasedGPUS, earn.OfferedGPUS, most)
	}
	if *earn.FillBP <= 0 || *earn.FillBP > 10000 || *earn.FillBP < 4*10000/most {
		t.Fatalf("fill %d bp: want 1 to 10000, at least %d", *earn.FillBP, 4*10000/most)
	}
	for _, d := range earn.Days {
		if d.FillBP != nil && *d.FillBP > 10000 {
			t.Fatalf("day %s: fill %d bp", d.Day, *d.FillBP)
		}
	}
}

// hasLineEnding reports whether a line of out ends with suffix.
func hasLineEnding(out, suffix string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, suffix) {
			return true
		}
	}
	return false
}

// A GPU a lease holds is never "free", whatever else it is.
func TestGPUStateCell(t *testing.T) {
	until := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	l := &node.GPULease{JobID: "j1", Tier: auction.Silver, State: "running", Price: 500_000, Until: until}
	at := until.Local().Format(time.DateTime)
	for _, c := range []struct {
		g    node.GPUStatus
		want string
	}{
		{node.GPUStatus{Offered: true}, "offered, free"},
		{node.GPUStatus{Offered: true, Lease: l}, "leased: job j1, silver, running at 0.5 credits per GPU-hour, until " + at + "; offered"},
		{node.GPUStatus{Withdrawn: "over 80°C", Lease: l}, "leased: job j1, silver, running at 0.5 credits per GPU-hour, until " + at + "; withdrawn: over 80°C"},
		{node.GPUStatus{Lease: l}, "leased: job j1, silver, running at 0.5 credits per GPU-hour, until " + at + "; not offered"},
		{node.GPUStatus{}, "not offered"},
		{node.GPUStatus{Withdrawn: "Xid 79", Stopping: "Xid 79", Fault: "Xid 79"}, "FAULTY, its jobs stopped, withdrawn until `offer clear-fault --gpu 0` or a restart: Xid 79"},
		{node.GPUStatus{Withdrawn: attest.MIGReason}, "withdrawn: in MIG mode: its instances are not offered yet"},
	} {
		if got := gpuState(c.g); got != c.want {
			t.Errorf("%+v: %q, want %q", c.g, got, c.want)
		}
	}
}

// Earnings are UTC days, and say so; offered since is in UTC too, not
// local time beside UTC days.
func TestPrintEarningsInUTC(t *testing.T) {
	since := time.Date(2026, 3, 10, 0, 30, 0, 0, time.FixedZone("X", 2*3600))
	var b strings.Builder
	printEarnings(&b, earnings.Result{From: since, To: since, OfferedSince: &since, Days: []earnings.Day{{Day: "2026-03-09"}}})
	for _, want := range []string{"offered since 2026-03-09 22:30:00 UTC", "DAY (UTC)", "from 2026-03-09 to 2026-03-09 (UTC)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}
