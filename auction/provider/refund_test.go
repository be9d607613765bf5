package provider

import (
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

func TestCharge(t *testing.T) {
	const ms = time.Millisecond
	// 2.25 credits per GPU-hour over a 60 s interval: 37,500 micro-credits
	// an interval, 625 a GPU-second.
	l := &auction.Lease{Price: 2_250_000, GPUs: 1, BillingSec: 60}
	two := &auction.Lease{Price: 2_250_000, GPUs: 2, BillingSec: 60}
	odd := &auction.Lease{Price: 1_000_000, GPUs: 1, BillingSec: 300} // 277.7… a second
	for _, tc := range []struct {
		name            string
		l               *auction.Lease
		ran             time.Duration
		total           auction.Credits
		charged, refund auction.Credits
	}{
		{"a 60 ms job pays one second", l, 60 * ms, 37_500, 625, 36_875},
		{"never ran", l, 0, 37_500, 0, 37_500},
		{"negative running time is none", l, -time.Second, 37_500, 0, 37_500},
		{"a whole second is not rounded up", l, 10 * time.Second, 37_500, 6_250, 31_250},
		{"a nanosecond over rounds up a second", l, 10*time.Second + 1, 37_500, 6_875, 30_625},
		{"two GPUs cost double", two, 60 * ms, 75_000, 1_250, 73_750},
		{"capped by the voucher", l, 2 * time.Minute, 37_500, 37_500, 0},
		{"a full interval is charged in full", l, time.Minute, 37_500, 37_500, 0},
		{"no voucher: nothing to charge", l, time.Minute, 0, 0, 0},
		{"micro-credits round up", odd, time.Second, 83_333, 278, 83_055},
		{"a free lease charges nothing", &auction.Lease{GPUs: 1, BillingSec: 60}, time.Hour, 10, 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, r := Charge(tc.l, tc.ran, tc.total)
			if c != tc.charged || r != tc.refund {
				t.Fatalf("Charge(%+v, %v, %d) = %d, %d; want %d, %d", tc.l, tc.ran, tc.total, c, r, tc.charged, tc.refund)
			}
		})
	}
}

// What a lease of these terms costs for ran, exactly, as a fraction:
// price × GPUs × ran / 1 h.
func exactCost(l *auction.Lease, ran time.Duration) *big.Rat {
	n := new(big.Int).Mul(big.NewInt(int64(l.Price)), big.NewInt(int64(l.GPUs)))
	n.Mul(n, big.NewInt(int64(max(ran, 0))))
	return new(big.Rat).SetFrac(n, big.NewInt(int64(time.Hour)))
}

// Charge's promises, over random leases, running times and voucher
// totals (including the totals payLoop signs: whole intervals).
func TestChargeProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	one := big.NewRat(1, 1)
	for i := range 20000 {
		l := &auction.Lease{Price: auction.Credits(rng.Int64N(50_000_000)), GPUs: 1 + rng.IntN(16), BillingSec: []int64{2, 60, 300, 3600}[rng.IntN(4)]}
		ran := time.Duration(rng.Int64N(int64(3 * time.Hour)))
		switch rng.IntN(4) {
		case 0:
			ran = 0
		case 1:
			ran = time.Duration(rng.Int64N(int64(2 * time.Second)))
		}
		total := IntervalPrice(l) * auction.Credits(rng.Int64N(40))
		if rng.IntN(3) == 0 {
			total = auction.Credits(rng.Int64N(1 << 40))
		}
		c, r := Charge(l, ran, total)
		fail := func(what string) {
			t.Fatalf("case %d: lease %+v ran %v total %d: charged %d refund %d: %s", i, l, ran, total, c, r, what)
		}
		switch {
		case c < 0 || r < 0:
			fail("a negative amount")
		case c > total:
			fail("charged more than the voucher covers")
		case r > total:
			fail("refunded more than was prepaid")
		case c+r != total:
			fail("charged + refund is not the voucher total")
		case ran == 0 && c != 0:
			fail("charged for a job that never ran")
		}
		// Never more than the whole seconds begun, rounded up by less than
		// one micro-credit...
		billed := exactCost(l, time.Duration(BilledSeconds(ran))*time.Second)
		if new(big.Rat).SetInt64(int64(c)).Cmp(new(big.Rat).Add(billed, one)) >= 0 {
			fail("more than the billed seconds' cost plus one micro-credit")
		}
		// ...and, unless the voucher caps it, never less than what ran.
		if c < total && new(big.Rat).SetInt64(int64(c)).Cmp(exactCost(l, ran)) < 0 {
			fail("less than the exact cost of what ran, uncapped")
		}
		// The billed time is ran rounded up by less than a second.
		if b := time.Duration(BilledSeconds(ran)) * time.Second; b < ran || b-ran >= time.Second {
			fail("billed seconds off")
		}
	}
}

// Huge terms saturate instead of wrapping negative.
func TestCostSaturates(t *testing.T) {
	l := &auction.Lease{Price: 1<<62 - 1, GPUs: 1 << 20, BillingSec: 3600}
	if c := Cost(l, 1000*time.Hour); c != 1<<63-1 {
		t.Fatalf("cost %d", c)
	}
	if c, r := Charge(l, 1000*time.Hour, 5); c != 5 || r != 0 {
		t.Fatalf("charged %d refund %d", c, r)
	}
	// The longest running time there is charges the whole voucher.
	if c, r := Charge(&auction.Lease{Price: 1, GPUs: 1, BillingSec: 60}, time.Duration(1<<63-1), 5); c != 5 || r != 0 {
		t.Fatalf("the longest run: charged %d refund %d", c, r)
	}
}

// A gold reservation claimed 90 s before its window is not billed while
// it waits: nothing pauses it for want of vouchers before it runs (the
// renter sends none until the window starts), and once it runs it has the
// whole grace from its first second, not from the claim.
func TestAReservationIsNotBilledBeforeItRuns(t *testing.T) {
	s := newSched(1)
	start := at(90 * time.Second)
	l := mkLease("gold", auction.Gold, 1, start, time.Hour)
	if _, err := s.Claim(l, []int{0}, t0); err != nil {
		t.Fatal(err)
	}
	if acts, err := s.Start("gold", t0); err != nil || len(acts) != 0 {
		t.Fatalf("start before the window: %v %v", show(acts), err)
	}
	var got []string
	for sec := 0; sec <= 90+int(Grace(l)/time.Second)+5; sec++ {
		now := at(time.Duration(sec) * time.Second)
		for _, a := range s.Tick(now) {
			got = append(got, a.Kind.String()+"@"+now.Sub(t0).String())
			if a.Kind == Launch {
				if err := s.Running("gold", now); err != nil {
					t.Fatal(err)
				}
			}
		}
		if in, _ := s.Lease("gold", now); now.Before(start) && (in.Ran != 0 || in.Running) {
			t.Fatalf("at %v, before the window: running %v, ran %v", now.Sub(t0), in.Running, in.Ran)
		}
		if sec == 90 {
			_ = s.PaidTotal("gold", IntervalPrice(l)) // the renter's first voucher, at the window's start
		}
	}
	// Launched at the window, paid one interval (60 s) then: no pause in
	// the 90 s of waiting nor in the grace after it.
	if g := strings.Join(got, " "); g != "launch@1m30s" {
		t.Fatalf("actions %q, want only the launch at the window's start", g)
	}
	in, _ := s.Lease("gold", at(100*time.Second))
	if c, r := Charge(l, in.Ran, IntervalPrice(l)); in.Ran != 10*time.Second || c != Cost(l, 10*time.Second) || r != IntervalPrice(l)-c {
		t.Fatalf("ran %v, charged %d, refund %d", in.Ran, c, r)
	}
}
