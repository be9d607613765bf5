package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
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
	p := provider(t, "provider", "2xRTX4090")
	rn := renter(t, p)
	ns := []*rnode{p, rn}
	a := rn.submit(t, demoSpec("train", "silver", "2s", 4, 0), "")
	b := rn.submit(t, demoSpec("train", "silver", "2s", 4, 0), "")
	for _, id := range []string{a, b} {
		rn.waitJob(t, id, 60*time.Second, "running", func(j node.JobRecord) bool { return j.State == node.StateRunning }, p)
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
	if r := p.cli(t, "offer", "show"); !strings.Contains(r.stdout, "leased: job "+a+", silver, running at 0.5 credits per GPU-hour") {
		t.Fatalf("offer show while %s runs:\n%s", a, r.stdout)
	}

	var charged auction.Credits
	for _, id := range []string{a, b} {
		j := rn.waitJob(t, id, 90*time.Second, "completed with a charge", func(j node.JobRecord) bool { return terminalState(j.State) }, p)
		if j.State != node.StateCompleted || j.Charged == nil || *j.Charged <= 0 || j.ChargeDisputed {
			t.Fatalf("job %s: %+v\n%s", id, j, tails(ns))
		}
		charged += *j.Charged
	}
	// At once, no wait: the provider's settlements may not have reached
	// the renter yet, and the reputation pass caches for 5 s.
	var bal node.BalanceResult
	decodeCLI(t, rn, &bal, "ledger", "balance")
	var sp node.SpendResult
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
	earnedMatches := func(e node.EarningsResult) bool {
		got := 0
		for _, j := range e.Jobs {
			if j.Settled && j.Renter == rn.d.peerID && j.Earned == spentOn[j.JobID] && j.GPUs == 1 && j.GPUSeconds > 0 && j.Day == today {
				got++
			}
		}
		return got == 2 && e.Earned == charged
	}
	var earn node.EarningsResult
	decodeCLI(t, p, &earn, "earnings", "--days", "1")
	if !earnedMatches(earn) || len(earn.Days) != 1 || earn.Days[0].Earned != charged {
		t.Fatalf("earnings: %+v, want both jobs at what the renter spent on each (%v)", earn, spentOn)
	}
	if r := p.cli(t, "earnings"); !strings.Contains(r.stdout, a) || !strings.Contains(r.stdout, credits(spentOn[a])) || !strings.Contains(r.stdout, "fill rate:") {
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
	if want := earn.LeasedGPUS * 10000 / earn.OfferedGPUS; *earn.FillBP != want {
		t.Fatalf("fill %d bp, want %d (leased %d / offered %d GPU-seconds)", *earn.FillBP, want, earn.LeasedGPUS, earn.OfferedGPUS)
	}
}
