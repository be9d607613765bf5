package ledger

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

const credit = auction.Credits(1_000_000)

var rnow = time.Unix(1_800_000_000, 0)

func rating(rater, subject string, paid auction.Credits, score float64, ago time.Duration) Rating {
	return Rating{Rater: rater, Subject: subject, Lease: fmt.Sprintf("%s>%s@%d", rater, subject, ago),
		Paid: paid, Score: score, Time: rnow.Add(-ago).Unix()}
}

// honestWorld: self has paid P1, P2 and been paid by R1, R2; R1 and R2
// have paid P3 and P4; P5 did one bad job for R1.
func honestWorld() ([]Rating, map[string]auction.Credits) {
	day := 24 * time.Hour
	rs := []Rating{
		rating("self", "P1", 10*credit, 0.9, day),
		rating("self", "P2", 5*credit, 0.8, 3*day),
		rating("R1", "P3", 20*credit, 1, 2*day),
		rating("R2", "P3", 8*credit, 0.9, day),
		rating("R2", "P4", 8*credit, 0.95, 5*day),
		rating("R1", "P5", 3*credit, 0.1, day),
		rating("P1", "R1", 10*credit, 1, day),
	}
	return rs, map[string]auction.Credits{"P1": 10 * credit, "P2": 5 * credit, "R1": 7 * credit, "R2": 4 * credit}
}

func TestReputationHonest(t *testing.T) {
	rs, paid := honestWorld()
	got := Reputation("self", rs, paid, rnow)
	for _, p := range []string{"P1", "P2", "P3", "P4"} {
		if got[p] <= 0 || got[p] >= 1 {
			t.Errorf("%s score %v", p, got[p])
		}
	}
	if got["P5"] >= got["P4"] {
		t.Errorf("bad provider P5 %v >= P4 %v", got["P5"], got["P4"])
	}
	if _, ok := got["self"]; ok {
		t.Error("self scored")
	}
	if _, ok := got["nobody"]; ok {
		t.Error("unknown peer scored")
	}
}

func addSybils(rs []Rating, n int, paid auction.Credits, victims []string) []Rating {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i++ {
		me := fmt.Sprintf("sybil%d", i)
		rs = append(rs, rating(me, me, paid, 1, time.Hour))
		for k := 0; k < 10; k++ {
			rs = append(rs, rating(me, fmt.Sprintf("sybil%d", rng.IntN(n)), paid, 1, time.Duration(k)*time.Hour))
		}
		for _, v := range victims {
			rs = append(rs, rating(me, v, paid, 0, time.Hour))
		}
	}
	return rs
}

func TestReputationSybilsDoNotMoveHonestScores(t *testing.T) {
	rs, paid := honestWorld()
	base := Reputation("self", rs, paid, rnow)
	victims := []string{"P1", "P2", "P3", "P4"}
	// Unpaid sybils are filtered outright; paid ones (paying each other in
	// a circle) are rated by nobody self's trust reaches, so carry no
	// weight either.
	for _, sybilPaid := range []auction.Credits{0, 100 * credit} {
		got := Reputation("self", addSybils(append([]Rating(nil), rs...), 1000, sybilPaid, victims), paid, rnow)
		for p, want := range base {
			if math.Abs(got[p]-want) > 1e-12 {
				t.Errorf("paid=%d: %s moved from %v to %v", sybilPaid, p, want, got[p])
			}
		}
		for p := range got {
			if _, ok := base[p]; !ok {
				t.Errorf("paid=%d: sybil %s got score %v", sybilPaid, p, got[p])
			}
		}
	}
}

func TestFreshIdentityNeverAboveCleanProvider(t *testing.T) {
	rs, paid := honestWorld()
	// The fresh identity is praised, with paid (circular) leases, by a
	// thousand sybils, and by itself.
	rs = addSybils(rs, 1000, 50*credit, nil)
	for i := 0; i < 1000; i++ {
		rs = append(rs, rating(fmt.Sprintf("sybil%d", i), "fresh", 50*credit, 1, time.Hour))
	}
	rs = append(rs, rating("fresh", "fresh", 1000*credit, 1, 0))
	got := Reputation("self", rs, paid, rnow)
	for _, clean := range []string{"P1", "P2", "P3", "P4"} {
		if got["fresh"] >= got[clean] || got[clean] == 0 {
			t.Errorf("fresh %v vs clean %s %v", got["fresh"], clean, got[clean])
		}
	}
	if _, ok := got["fresh"]; ok {
		t.Errorf("fresh identity has a reputation: %v", got["fresh"])
	}
}

func TestReputationDecay(t *testing.T) {
	// Same evidence, one bad rating recent and one old: the recent one
	// dominates.
	day := 24 * time.Hour
	rs := []Rating{
		rating("self", "A", credit, 0, 300*day), rating("self", "A", credit, 1, day),
		rating("self", "B", credit, 1, 300*day), rating("self", "B", credit, 0, day),
	}
	got := Reputation("self", rs, nil, rnow)
	if !(got["A"] > got["B"]) {
		t.Errorf("decay: A %v, B %v", got["A"], got["B"])
	}
	// Future-dated and unpaid ratings are ignored.
	rs = []Rating{rating("self", "C", credit, 1, -day), rating("self", "D", 0, 1, day)}
	if got := Reputation("self", rs, nil, rnow); len(got) != 0 {
		t.Errorf("ignored ratings counted: %v", got)
	}
}

func BenchmarkReputation10k(b *testing.B) {
	const peers, n = 10_000, 100_000
	rng := rand.New(rand.NewPCG(7, 9))
	name := func(i int) string { return fmt.Sprintf("peer%05d", i) }
	rs := make([]Rating, 0, n)
	for i := 0; i < n; i++ {
		r, s := rng.IntN(peers), rng.IntN(peers)
		if i < 100 {
			r = 0 // self's own experience
		}
		rs = append(rs, Rating{Rater: name(r), Subject: name(s), Lease: fmt.Sprint("lease", i),
			Paid: auction.Credits(1 + rng.IntN(100_000_000)), Score: rng.Float64(),
			Time: rnow.Add(-time.Duration(rng.IntN(90*24)) * time.Hour).Unix()})
	}
	paid := map[string]auction.Credits{}
	for i := 1; i <= 50; i++ {
		paid[name(i)] = credit
	}
	b.ResetTimer()
	for b.Loop() {
		if len(Reputation(name(0), rs, paid, rnow)) == 0 {
			b.Fatal("no scores")
		}
	}
}
