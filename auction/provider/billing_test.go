package provider

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// pay is a voucher arriving at an offset from the job's start.
type pay struct {
	at      time.Duration
	covered time.Duration // or, with credits set, the total in credits
	credits auction.Credits
}

// Billing over a 60 s interval (grace 30 s, patience 120 s), driven by Due
// alone, so each action lands at the first instant it is owed: a late Due
// would move it later.
func TestBilling(t *testing.T) {
	const ns = time.Nanosecond
	s60 := func(n int) time.Duration { return time.Duration(n) * time.Minute }
	for _, tc := range []struct {
		name    string
		price   auction.Credits // per GPU-hour; 0: the default
		pays    []pay
		horizon time.Duration
		want    string
	}{
		{name: "paid ahead", pays: []pay{{0, s60(1), 0}, {s60(1), s60(2), 0}, {s60(2), s60(3), 0}, {s60(3), s60(4), 0}},
			horizon: 200 * time.Second},
		{name: "paid within the grace", pays: []pay{{0, s60(1), 0}, {85 * time.Second, s60(2), 0}, {145 * time.Second, s60(3), 0}},
			horizon: 170 * time.Second},
		{name: "never paid", horizon: 10 * time.Minute,
			want: fmt.Sprintf("pause@%v stop-unpaid@%v", 30*time.Second+ns, 150*time.Second+2*ns)},
		{name: "a late voucher resumes; paused time is not billed", pays: []pay{{0, s60(1), 0}, {100 * time.Second, s60(2), 0}},
			horizon: 5 * time.Minute,
			want: fmt.Sprintf("pause@%v resume@%v pause@%v stop-unpaid@%v",
				90*time.Second+ns, 100*time.Second, 160*time.Second, 280*time.Second+ns)},
		{name: "covering exactly the time run resumes", pays: []pay{{0, s60(1), 0}, {100 * time.Second, 90*time.Second + ns, 0}},
			horizon: 140 * time.Second,
			want:    fmt.Sprintf("pause@%v resume@%v pause@%v", 90*time.Second+ns, 100*time.Second, 130*time.Second+ns)},
		{name: "a smaller total changes nothing", pays: []pay{{0, s60(2), 0}, {10 * time.Second, s60(1), 0}},
			horizon: 160 * time.Second, want: fmt.Sprintf("pause@%v", 150*time.Second+ns)},
		{name: "credits cover whole intervals", price: 3_600_000, pays: []pay{{0, 0, 150_000}},
			horizon: 3 * time.Minute, want: fmt.Sprintf("pause@%v", 150*time.Second+ns)},
		{name: "a free lease never pauses", price: 1, horizon: 50 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSched(1)
			l := mkLease("j", auction.Silver, 1, t0, time.Hour)
			if tc.price != 0 {
				l.Price = tc.price
			}
			if _, err := s.Claim(l, []int{0}, t0); err != nil {
				t.Fatal(err)
			}
			if acts, err := s.Start("j", t0); err != nil || show(acts) != "launch:j" {
				t.Fatalf("start: %v %v", acts, err)
			}
			if err := s.Running("j", t0); err != nil {
				t.Fatal(err)
			}
			var got []string
			pays, now := tc.pays, t0
			for range 1000 {
				next := tc.horizon
				if len(pays) > 0 {
					next = pays[0].at
				}
				if due := s.Due(); !due.IsZero() && !due.After(t0.Add(next)) {
					now = later(now, due) // a due in the past means now
					for _, a := range s.Tick(now) {
						got = append(got, fmt.Sprintf("%s@%v", a.Kind, now.Sub(t0)))
					}
					continue
				}
				if len(pays) == 0 {
					break
				}
				p := pays[0]
				pays, now = pays[1:], t0.Add(p.at)
				if p.credits > 0 {
					s.PaidTotal("j", p.credits)
				} else {
					s.Paid("j", p.covered)
				}
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Fatalf("actions\n got %q\nwant %q", g, tc.want)
			}
		})
	}
}

// Scanning every lease every second, whatever Due says, gives the same
// actions a second late at most, never earlier and never repeated: the
// conditions in step hold by themselves, not only at the instants next
// computes.
func TestBillingScannedEverySecond(t *testing.T) {
	s := newSched(1)
	s.Claim(mkLease("j", auction.Silver, 1, t0, time.Hour), []int{0}, t0)
	s.Start("j", t0)
	s.Running("j", t0)
	s.Paid("j", time.Minute)
	var got []string
	for sec := range 400 {
		now := at(time.Duration(sec) * time.Second)
		if sec == 100 {
			s.Paid("j", 2*time.Minute)
		}
		s.mu.Lock()
		for _, l := range s.active {
			l.next = now // force a scan
		}
		s.stale = true
		s.mu.Unlock()
		for _, a := range s.Tick(now) {
			got = append(got, fmt.Sprintf("%s@%d", a.Kind, sec))
		}
	}
	// Paused once ran exceeds 60 s + 30 s of grace (at 90 s it equals it),
	// resumed by the voucher at 100 s, paused again when ran exceeds
	// 150 s (at 160 s: 9 s were paused), stopped once paused for more than
	// 120 s.
	if g := strings.Join(got, " "); g != "pause@91 resume@100 pause@160 stop-unpaid@281" {
		t.Fatalf("got %q", g)
	}
	if in, _ := s.Lease("j", at(400*time.Second)); in.Ending != StopUnpaid || in.Ran != 151*time.Second {
		t.Fatalf("ending %v, ran %v", in.Ending, in.Ran)
	}
}

func TestGraceAndPatience(t *testing.T) {
	for _, tc := range []struct {
		billing         int64
		grace, patience time.Duration
	}{
		{20, 10 * time.Second, 40 * time.Second},
		{60, 30 * time.Second, 2 * time.Minute},
		{3600, 30 * time.Second, 2 * time.Hour},
	} {
		l := &auction.Lease{BillingSec: tc.billing, Price: 1_000_000, GPUs: 2}
		if g, p := Grace(l), Patience(l); g != tc.grace || p != tc.patience {
			t.Errorf("billing %d s: grace %v patience %v, want %v %v", tc.billing, g, p, tc.grace, tc.patience)
		}
		if want := auction.Credits(2 * 1_000_000 * tc.billing / 3600); IntervalPrice(l) != want {
			t.Errorf("billing %d s: interval price %d, want %d", tc.billing, IntervalPrice(l), want)
		}
	}
}
