package testnet

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
)

// The schedule is the seed's alone, and keeps the market able to work:
// never more than two providers down, one renter, one partition.
func TestSoakScheduleIsSeededAndBounded(t *testing.T) {
	mk := func(n int) []*soakNode { return make([]*soakNode, n) }
	a := soakSchedule(7, 10*time.Minute, mk(5), mk(3))
	b := soakSchedule(7, 10*time.Minute, mk(5), mk(3))
	c := soakSchedule(8, 10*time.Minute, mk(5), mk(3))
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	jc, _ := json.Marshal(c)
	if string(ja) != string(jb) {
		t.Fatal("one seed gave two schedules")
	}
	if string(ja) == string(jc) {
		t.Fatal("two seeds gave one schedule")
	}
	if len(a) < 30 {
		t.Fatalf("%d faults in 10 minutes: want one every 8 to 16 s", len(a))
	}
	kinds := map[string]int{}
	for i, f := range a {
		kinds[f.Kind]++
		if f.At+f.For > 10*time.Minute {
			t.Errorf("fault %d ends after the soak: %+v", i, f)
		}
		provDown, rentDown, apart := 0, 0, 0
		for _, g := range a[:i+1] {
			if g.Kind == faultPartition && f.Kind == faultPartition && g.At < f.At && f.At < g.At+g.For+healMeasure {
				t.Fatalf("a partition at %v while the one at %v still heals", f.At, g.At)
			}
			if g.At <= f.At && f.At < g.At+g.For {
				switch {
				case g.Kind == faultPartition:
					apart++
				case g.Node >= 5:
					rentDown++
				default:
					provDown++
				}
			}
		}
		if provDown > 2 || rentDown > 1 || apart > 1 {
			t.Fatalf("at %v: %d providers down, %d renters, %d partitions", f.At, provDown, rentDown, apart)
		}
	}
	for _, k := range []string{faultKill, faultStop, faultPartition} {
		if kinds[k] == 0 {
			t.Errorf("no %s in 10 minutes: %v", k, kinds)
		}
	}
}

// auditFeed counts a silver lease on a GPU that another silver lease still
// holds, and not one after the first was settled or one that follows a
// bronze lease (preempted with notice before the next one's job launches).
func TestAuditFeedFindsDoubleBooking(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0).UTC()
	lease := func(seq uint64, cid string, tier auction.Tier, at int64) node.EntryView {
		return node.EntryView{Seq: seq, Type: ledger.TypeLease, Time: t0.Add(time.Duration(at) * time.Second), LeaseCID: cid,
			Lease: &auction.Lease{Tier: tier, Start: t0.Unix() + at, End: t0.Unix() + at + 600, GPUUUIDHash: []string{"gpu0"}}}
	}
	settle := func(seq uint64, cid string, at int64) node.EntryView {
		charged := auction.Credits(0)
		p, _ := json.Marshal(ledger.Settlement{Lease: cid, Renter: "r", Charged: &charged})
		return node.EntryView{Seq: seq, Type: ledger.TypeSettlement, Time: t0.Add(time.Duration(at) * time.Second), Payload: p}
	}
	honest := []node.EntryView{
		lease(1, "A", auction.Silver, 0), settle(2, "A", 30), lease(3, "B", auction.Silver, 31),
		lease(4, "C", auction.Bronze, 40), settle(5, "B", 50), lease(6, "D", auction.Silver, 60), settle(7, "C", 65), settle(8, "D", 90),
	}
	if sec, leases, settled, err := auditFeed(honest); err != nil || sec != 0 || leases != 4 || settled != 4 {
		t.Fatalf("honest feed: %d s, %d leases, %d settlements, %v", sec, leases, settled, err)
	}
	double := []node.EntryView{lease(1, "A", auction.Silver, 0), lease(2, "B", auction.Silver, 10), settle(3, "A", 40), settle(4, "B", 70)}
	sec, _, _, err := auditFeed(double)
	if err == nil || !strings.Contains(err.Error(), "lease B took GPU gpu0 while lease A held it") || sec != 30 {
		t.Fatalf("double booking: %d s, %v; want 30 s and the conflict named", sec, err)
	}
	over := settle(2, "A", 30)
	var st ledger.Settlement
	_ = json.Unmarshal(over.Payload, &st)
	charged := auction.Credits(5)
	st.Charged, st.Total = &charged, 5
	over.Payload, _ = json.Marshal(st)
	if _, _, _, err := auditFeed([]node.EntryView{lease(1, "A", auction.Silver, 0), over}); err == nil || !strings.Contains(err.Error(), "claims 5 with no voucher") {
		t.Fatalf("a settlement with no voucher behind it: %v", err)
	}
}

// The job and ledger checks fail the soak on what they are there to catch:
// a job that never ended, one that ended without a reason, and two nodes
// holding different heads of one feed.
func TestSoakChecksCatchLostJobsAndDivergentLedgers(t *testing.T) {
	s := &soak{jobs: map[string]*soakJob{
		"r1/done":    {state: renting.StateCompleted},
		"r1/failed":  {state: renting.StateFailed, errText: "lost the provider: stream reset"},
		"r2/stuck":   {state: renting.StateRunning},
		"r2/silent":  {state: renting.StateFailed},
		"r3/nomatch": {state: renting.StateNoMatch, errText: "no provider matched: 5 feasible offers"},
	}}
	s.checkJobs()
	if s.rep.Completed != 1 || s.rep.Lost != 2 || len(s.rep.Violations) != 2 {
		t.Fatalf("completed %d, lost %d, violations %q; want 1, 2 and one for each of stuck and silent", s.rep.Completed, s.rep.Lost, s.rep.Violations)
	}
	if s.rep.Ended["lost the provider"] != 1 || s.rep.Ended["no provider matched"] != 1 {
		t.Fatalf("endings by reason: %v", s.rep.Ended)
	}
	same := map[string]map[string]node.HeadView{
		"a": {"p": {Author: "p", Seq: 3, CID: "x"}},
		"b": {"p": {Author: "p", Seq: 3, CID: "x"}},
	}
	if !identical(same) {
		t.Fatal("identical heads read as different")
	}
	same["b"]["p"] = node.HeadView{Author: "p", Seq: 3, CID: "y"}
	if identical(same) {
		t.Fatal("two heads of one feed read as identical")
	}
	same["b"] = map[string]node.HeadView{}
	if identical(same) {
		t.Fatal("a node missing a feed reads as identical")
	}
}
