package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// Re-auctions on real daemons (libp2p on loopback, bbolt, Docker): a run
// the provider could not start, and a run lost to a preemption while the
// other providers' offers had not caught up.

// startSeller starts a provider selling one simulated GPU at bronze and
// silver for 0.50, edited by policy, and waits for its offer.
func startSeller(t testing.TB, ctx context.Context, policy func(*offers.Settings)) *Node {
	return startSellerWith(t, ctx, Options{}, policy)
}

// startSellerWith is startSeller with the node's options.
func startSellerWith(t testing.TB, ctx context.Context, opts Options, policy func(*offers.Settings)) *Node {
	t.Helper()
	n := startTestNode(t, ctx, "1xRTX4090", opts)
	if _, err := n.provider.Update(func(s offers.Settings) (offers.Settings, error) {
		s.Region = auction.Region{Country: "DE", Continent: "eu"}
		s.Prices.Bronze, s.Prices.Silver = 500_000, 500_000
		if policy != nil {
			policy(&s)
		}
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	n.provider.Poke()
	waitFor(t, 20*time.Second, "the provider's offer", func() bool {
		cur := n.provider.Current()
		return cur != nil && len(cur.GPUs) == 1
	})
	return n
}

// renterOf starts a renter connected to every provider, with all their
// offers in its book.
func renterOf(t testing.TB, ctx context.Context, provs ...*Node) *Node {
	t.Helper()
	rn := startTestNode(t, ctx, "", Options{})
	for _, p := range provs {
		if err := rn.Host().LibP2P().Connect(ctx, addrInfo(p.Host())); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the providers' offers in the renter's book", func() bool {
		for _, p := range provs {
			if _, _, ok := rn.market.Book().Get(p.Host().ID().String()); !ok {
				return false
			}
		}
		return true
	})
	return rn
}

// settlementsFor are the settlements prov journaled for renter's leases.
func settlementsFor(t *testing.T, prov *Node, renter string) []ledger.Settlement {
	t.Helper()
	var out []ledger.Settlement
	err := prov.ledger.Walk(prov.Host().ID().String(), 0, 1<<62, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		if e.Type != ledger.TypeSettlement {
			return nil
		}
		if s, err := ledger.DecodePayload[ledger.Settlement](e.Payload); err == nil && s.Renter == renter {
			out = append(out, *s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// An image no provider can pull is the renter's fault, not the
// providers': the first provider's failure sends the job to another (not
// failing it, and spending no re-auction), the second's fails it with a
// message that names the image and the pull error, although re-auctions
// and a third provider are left. Nothing is charged, by either provider's
// settlement or in the renter's record, and `job explain` says why.
//
// Here the engine cannot pull a tag it does not have because it has no
// network (a lookup of the registry fails); with one, the registry
// answers that the repository or manifest does not exist. Either way the
// executor reports "executor: pull <ref>: ...", as it does on every
// provider.
func TestAnImageNoProviderCanPullFailsTheJobAfterTwoProviders(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	provs := []*Node{startSeller(t, ctx, nil), startSeller(t, ctx, nil), startSeller(t, ctx, nil)}
	rn := renterOf(t, ctx, provs...)
	image := strings.Split(demoimage.Tag, ":")[0] + ":no-such-tag"
	spec := "name: unpullable\nimage: " + image + "\ncommand: [\"-sleep\", \"1s\"]\nresources: {gpus: 1}\ntier: bronze\n" +
		"max_price: 1.00\nduration: {expected: 1m, max: 5m}\nallow_simulated: true\nretry: {max_reauctions: 3}\n"
	began := time.Now()
	sub, err := rn.renterJobs.Submit([]byte(spec), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	events, err := rn.renterJobs.Follow(fctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Auctioned again after the first failure, not failed.
	again := false
	for ev := range events {
		again = again || ev.State == renting.StateAuction && strings.Contains(ev.Note, providing.PullFailed) && strings.Contains(ev.Note, "auctioning again")
		if renting.Terminal(ev.State) {
			break
		}
	}
	if !again {
		t.Error("the job was not auctioned again after the first provider's failed pull")
	}
	j := waitJob(t, rn, sub.ID, 30*time.Second, "failed", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	took := time.Since(began)
	if j.State != renting.StateFailed || !strings.Contains(j.Error, `2 providers could not pull the image "`+image+`"`) ||
		!strings.Contains(j.Error, "executor: pull "+image) {
		t.Fatalf("the job is %s: %q; want failed, naming the image and the pull error", j.State, j.Error)
	}
	t.Logf("failed %v after the submit: %s", took, j.Error)
	if j.Attempts != 2 {
		t.Errorf("%d leases taken, want 2", j.Attempts)
	}
	if j.Charged == nil || *j.Charged != 0 || j.Refunded != j.Paid || j.ChargeDisputed {
		t.Errorf("the renter's record: charged %v, refunded %d of %d paid ahead (disputed %v); want nothing charged",
			j.Charged, j.Refunded, j.Paid, j.ChargeDisputed)
	}
	// Two providers leased it, the third never did; each settled its
	// lease with nothing charged and no voucher cited. A provider settles
	// after it has told the renter the job did not start, so the second
	// settlement may land a moment after the renter's failure.
	me := rn.Host().ID().String()
	settled := func() (n int) {
		for _, p := range provs {
			n += len(settlementsFor(t, p, me))
		}
		return n
	}
	waitFor(t, 10*time.Second, "two settled leases", func() bool { return settled() >= 2 })
	time.Sleep(500 * time.Millisecond) // a third, wrongly, would land by now
	if n := settled(); n != 2 {
		t.Errorf("%d settled leases, want 2 (the job fails after two providers' failed pulls)", n)
	}
	for i, p := range provs {
		for _, s := range settlementsFor(t, p, me) {
			if s.Charged == nil || *s.Charged != 0 || s.Total != 0 || len(s.Voucher) != 0 {
				t.Errorf("provider %d settled the failed start charging %v of %d (voucher cited: %v), want nothing", i, s.Charged, s.Total, len(s.Voucher) > 0)
			}
		}
	}
	// The explain: the provider the job left, and why; the award that
	// could not start, and why.
	ex := j.Explain
	if ex == nil {
		t.Fatal("no explain")
	}
	var left, failed bool
	for _, r := range ex.Rejected {
		left = left || r.Check == "excluded" && strings.Contains(r.Reason, providing.PullFailed)
	}
	for _, a := range ex.Awards {
		failed = failed || a.Provider == j.Provider && strings.Contains(a.Error, "could not start: "+providing.PullFailed)
	}
	if !left || !failed {
		t.Errorf("the explain does not say why: rejected %+v, awards %+v", ex.Rejected, ex.Awards)
	}
	if got := containers(t, sub.ID); len(got) != 0 {
		t.Errorf("containers left: %v", got)
	}
}

// A preempted bronze job with re-auctions left is not given up because
// the book has not caught up: its other provider is busy when the job is
// preempted and frees its GPU seconds later, and the job is leased there
// and completes, having waited with notes that say so. Before, the
// re-auction ended no-match 2 s after the preemption.
func TestAPreemptedBronzeJobWaitsForTheBookToCatchUp(t *testing.T) {
	waitsOnItsOwnJobs(t)
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	notice := func(s *offers.Settings) { s.Policy.PreemptNotice = 2 }
	a, b := startSeller(t, ctx, notice), startSeller(t, ctx, notice)
	rn := renterOf(t, ctx, a, b)
	bronze := func(name, sleep string, reauctions int) string {
		return "name: " + name + "\nimage: " + demoimage.Tag + "\ncommand: [\"-sleep\", \"" + sleep + "\", \"-lines\", \"2\"]\n" +
			"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {expected: 1m, max: 5m}\nallow_simulated: true\n" +
			"retry: {max_reauctions: " + string(rune('0'+reauctions)) + "}\n"
	}
	// b is busy with a job of its own renter's.
	blocker, err := rn.renterJobs.Submit([]byte(bronze("blocker", "5m", 0)), nil, renting.SubmitOptions{Provider: b.Host().ID().String()})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, blocker.ID, 30*time.Second, "the blocker running", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning })
	victim, err := rn.renterJobs.Submit([]byte(bronze("victim", "3s", 2)), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := waitJob(t, rn, victim.ID, 30*time.Second, "the victim running", func(j *renting.JobRecord) bool { return j.State == renting.StateRunning })
	if v.Provider != a.Host().ID().String() {
		t.Fatalf("the victim runs on %s, want the free provider", v.Provider)
	}
	// a's owner takes the GPU back: the victim is preempted with notice,
	// and the only other provider is still busy.
	if err := a.GPUSource().(*attest.Simulated).SetLoad(0, 60, 200, []attest.Process{{PID: 31337, UsedMiB: 4096, Name: "owner-game"}}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, victim.ID, 30*time.Second, "the victim preempted and auctioned again", func(j *renting.JobRecord) bool {
		return j.State == renting.StateAuction && strings.Contains(j.Error, "no re-auction spent")
	})
	preempted := time.Now()
	// It waits, spending nothing, and says so; past the 2 s it used to
	// take to give up.
	w := waitJob(t, rn, victim.ID, 30*time.Second, "the victim waiting for the book", func(j *renting.JobRecord) bool {
		return j.State == renting.StateAuction && strings.Contains(j.Error, "7s of 30m0s waited, no re-auction spent")
	})
	t.Logf("%v after the first round without a match: %s", time.Since(preempted), w.Error)
	// A preemption never excludes the provider: a is left out only while
	// its owner holds the GPU, for that reason.
	if ex := w.Explain; ex != nil {
		for _, r := range ex.Rejected {
			if r.Provider == a.Host().ID().String() && r.Check == "excluded" {
				t.Errorf("the provider that preempted the job is excluded: %+v", r)
			}
		}
	}
	if _, err := rn.renterJobs.Cancel(ctx, blocker.ID); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	done := waitJob(t, rn, victim.ID, 60*time.Second, "the victim completed", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	t.Logf("completed %v after b was freed, %v after the preemption", time.Since(freed), time.Since(preempted))
	if done.Provider != b.Host().ID().String() || done.Attempts != 2 {
		t.Errorf("the victim completed on %s after %d leases, want on the freed provider after 2", done.Provider, done.Attempts)
	}
	if done.Error != "" {
		t.Errorf("the completed job still shows %q", done.Error)
	}
}

// With one provider, a failed pull ends the job failed at once, naming the
// image and the registry's answer: no provider is left to try, and the
// minute of patience a job sent back to auction gets would not help.
// Before, the renter waited that minute ("offers may not have caught up")
// and ended no-match.
func TestAFailedPullOnTheOnlyProviderFailsTheJobAtOnce(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prov := startSeller(t, ctx, nil)
	rn := renterOf(t, ctx, prov)
	image := strings.Split(demoimage.Tag, ":")[0] + ":no-such-tag"
	spec := "name: unpullable\nimage: " + image + "\ncommand: [\"-sleep\", \"1s\"]\nresources: {gpus: 1}\ntier: bronze\n" +
		"max_price: 1.00\nduration: {expected: 1m, max: 5m}\nallow_simulated: true\nretry: {max_reauctions: 3}\n"
	began := time.Now()
	sub, err := rn.renterJobs.Submit([]byte(spec), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, rn, sub.ID, 30*time.Second, "ended", func(j *renting.JobRecord) bool { return renting.Terminal(j.State) })
	took := time.Since(began)
	if j.State != renting.StateFailed || !strings.Contains(j.Error, `1 provider could not pull the image "`+image+`"`) ||
		!strings.Contains(j.Error, "executor: pull "+image) || !strings.Contains(j.Error, "nothing was charged") {
		t.Fatalf("the job is %s: %q; want failed, naming the image and the pull error", j.State, j.Error)
	}
	if took > 10*time.Second {
		t.Errorf("failed %v after the submit, want at once (well under the minute of patience)", took)
	}
	t.Logf("failed %v after the submit: %s", took.Round(time.Millisecond), j.Error)
}
