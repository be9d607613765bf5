package provider

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// model is what the scheduler promised, rebuilt from its answers alone.
type model struct {
	t        *testing.T
	tier     map[string]auction.Tier
	spans    map[int][]mspan  // what each GPU is committed to, unreleased
	gpus     map[string][]int // the GPUs each claim named
	occupied map[int][]string // launched on the GPU and not yet released
	out      map[int]bool     // withdrawn by the owner
	starts   map[string]int
	launches map[string]int
	endings  map[string]int
	released map[string]bool
	kinds    map[Kind]int // actions seen, to show the run covers them all
	// backfills and reserved count bronze claims cut by a reservation and
	// preemptions for one, to show the run covers the calendar too.
	backfills, reserved *int
}

// mspan is one lease's commitment of one GPU in the model.
type mspan struct {
	job        string
	tier       auction.Tier
	start, end time.Time
	leaseEnd   time.Time // a backfill's own end, before a reservation cut it
	notice     time.Duration
}

// modelNotice is mkLease's notice.
const modelNotice = 30 * time.Second

// hold is the span the model expects a claim to commit: a gold
// reservation its own window, anything else from now; bronze is cut at the
// first reservation in its way.
func (m *model) hold(tier auction.Tier, gpus []int, start, end, now time.Time) (time.Time, time.Time) {
	from := now
	if tier == auction.Gold && start.After(now) {
		from = start
	}
	if tier == auction.Bronze {
		for _, g := range gpus {
			for _, o := range m.spans[g] {
				if o.tier != auction.Bronze && o.start.After(from) && o.start.Before(end) {
					end = o.start
				}
			}
		}
	}
	return from, end
}

// conflict is the first commitment on gpus that a claim of tier for
// [from, to) at now may not overlap, if any. A backfill is checked for its
// whole lease, before it is cut.
func (m *model) conflict(tier auction.Tier, gpus []int, from, to, now time.Time) (mspan, bool) {
	for _, g := range gpus {
		for _, o := range m.spans[g] {
			if !m.overlaps(o, from, to, now) {
				continue
			}
			switch {
			case o.tier == auction.Bronze && tier != auction.Bronze: // it yields
			case tier == auction.Bronze && o.tier != auction.Bronze && o.start.Sub(now) >= modelNotice+MinBackfill: // backfill
			default:
				return o, true
			}
		}
	}
	return mspan{}, false
}

// overlaps: o is in the way of [from, to) at now. A lease holds its GPUs
// past its end until it is released, so it is in the way of a span that
// starts now.
func (m *model) overlaps(o mspan, from, to, now time.Time) bool {
	return o.start.Before(to) && (from.Before(o.end) || !from.After(now))
}

// claimed checks a successful claim against the model: no GPU is
// committed to two leases for overlapping time unless one yields, bronze
// to a higher tier or a backfill to the reservation after it.
func (m *model) claimed(job string, tier auction.Tier, gpus []int, start, end, now time.Time, acts []Action) {
	for _, g := range gpus {
		if m.out[g] {
			m.t.Fatalf("%s claimed withdrawn GPU %d", job, g)
		}
	}
	from, to := m.hold(tier, gpus, start, end, now)
	if o, bad := m.conflict(tier, gpus, from, end, now); bad {
		m.t.Fatalf("GPUs %v committed to %s (%s %v..%v) and %s (%s %v..%v)", gpus, o.job, o.tier, o.start, o.end, job, tier, from, to)
	}
	var yielded []string
	for _, g := range gpus {
		kept := m.spans[g][:0]
		for _, o := range m.spans[g] {
			if o.tier == auction.Bronze && tier != auction.Bronze && m.overlaps(o, from, to, now) {
				yielded = append(yielded, o.job)
				if from.Sub(now) < o.notice {
					continue // preempted now: the GPU passes at once
				}
				o.end = from // it runs until the reservation
			}
			kept = append(kept, o)
		}
		m.spans[g] = append(kept, mspan{job: job, tier: tier, start: from, end: to, leaseEnd: end, notice: modelNotice})
	}
	m.tier[job], m.gpus[job] = tier, gpus
	if tier == auction.Bronze && to.Before(end) {
		*m.backfills++
	}
	for _, a := range acts {
		if !slices.Contains(yielded, a.JobID) {
			m.t.Fatalf("%s preempted %s, which held none of %v", job, a.JobID, gpus)
		}
	}
	m.acted(acts)
}

// refused checks that a refused claim had a reason.
func (m *model) refused(tier auction.Tier, gpus []int, start, end, now time.Time, err error) {
	switch {
	case errors.Is(err, ErrRaced):
		from, to := m.hold(tier, gpus, start, end, now)
		if _, bad := m.conflict(tier, gpus, from, end, now); !bad {
			m.t.Fatalf("claim of %v at %s for %v..%v refused as raced, but every GPU was free or yields", gpus, tier, from, to)
		}
	case errors.Is(err, ErrWithdrawn):
		if !slices.ContainsFunc(gpus, func(g int) bool { return m.out[g] }) {
			m.t.Fatalf("claim of %v refused as withdrawn: %v", gpus, err)
		}
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrDuplicate):
	default:
		m.t.Fatalf("claim of %v: %v", gpus, err)
	}
}

func (m *model) acted(acts []Action) {
	for _, a := range acts {
		m.kinds[a.Kind]++
		j := a.JobID
		if m.released[j] {
			m.t.Fatalf("%s after %s was released", a.Kind, j)
		}
		if a.Kind == Preempt && a.Reason == ReasonReserved {
			*m.reserved++
		}
		if a.Kind == Preempt && m.tier[j] != auction.Bronze {
			m.t.Fatalf("%s lease %s preempted: %s", m.tier[j], j, a.Message())
		}
		if a.Kind.Ends() {
			if m.endings[j]++; m.endings[j] > 1 {
				m.t.Fatalf("%s ended twice (%s)", j, a.Kind)
			}
		}
		if a.Kind == Launch {
			if m.launches[j]++; m.launches[j] > 1 || m.starts[j] != 1 {
				m.t.Fatalf("%s launched %d times after %d starts", j, m.launches[j], m.starts[j])
			}
			for _, g := range m.gpus[j] {
				if occ := m.occupied[g]; len(occ) > 0 {
					m.t.Fatalf("%s launched on GPU %d that %v still occupy", j, g, occ)
				}
				m.occupied[g] = append(m.occupied[g], j)
			}
		}
	}
}

func (m *model) release(job string) {
	m.released[job] = true
	for g, occ := range m.occupied {
		m.occupied[g] = slices.DeleteFunc(occ, func(x string) bool { return x == job })
	}
	for g := range m.spans {
		m.spans[g] = slices.DeleteFunc(m.spans[g], func(o mspan) bool { return o.job == job })
	}
	// A backfill that a released reservation had cut runs to its own end
	// again, or to the next reservation.
	for _, g := range m.gpus[job] {
		for _, o := range m.spans[g] {
			if o.tier != auction.Bronze {
				continue
			}
			end := o.leaseEnd
			for _, h := range m.gpus[o.job] {
				for _, r := range m.spans[h] {
					if r.tier != auction.Bronze && r.start.After(o.start) && r.start.Before(end) {
						end = r.start
					}
				}
			}
			for _, h := range m.gpus[o.job] {
				for i := range m.spans[h] {
					if m.spans[h][i].job == o.job {
						m.spans[h][i].end = end
					}
				}
			}
		}
	}
}

// Random sequences of quotes, claims (many of them conflicting), starts,
// payments, releases, owner reclaims and ticks, checked against the model
// after every step: no GPU is ever committed to two leases for
// overlapping time, silver and gold are never preempted, a lease starts
// and launches at most once and only on GPUs nobody else occupies, and
// ends at most once.
func TestProperties(t *testing.T) {
	tiers := []auction.Tier{auction.Bronze, auction.Bronze, auction.Silver, auction.Gold}
	kinds, backfills, reserved := map[Kind]int{}, 0, 0
	for seed := range 60 {
		r := rand.New(rand.NewPCG(uint64(seed), 3))
		const n = 6
		s := newSched(n)
		s.SetWindows([]auction.Window{{Start: t0.Unix(), End: at(90 * time.Minute).Unix()}, {Start: at(100 * time.Minute).Unix(), End: at(24 * time.Hour).Unix()}}, t0)
		m := &model{t: t, tier: map[string]auction.Tier{}, spans: map[int][]mspan{}, gpus: map[string][]int{}, occupied: map[int][]string{},
			out: map[int]bool{}, starts: map[string]int{}, launches: map[string]int{}, endings: map[string]int{}, released: map[string]bool{}, kinds: kinds,
			backfills: &backfills, reserved: &reserved}
		now := t0
		var jobs []string
		startJob := func(j string) {
			acts, err := s.Start(j, now)
			if err == nil {
				if m.starts[j]++; m.starts[j] > 1 {
					t.Fatalf("seed %d: %s started twice", seed, j)
				}
			}
			m.acted(acts)
			if in, ok := s.Lease(j, now); ok && in.Launched {
				s.Running(j, now)
				s.Paid(j, time.Duration(r.IntN(5))*time.Minute)
			}
		}
		for step := range 400 {
			switch op := r.IntN(10); {
			case op < 3: // a claim, of a plan or of GPUs picked at random
				job, tier := fmt.Sprintf("j%d", step), tiers[r.IntN(len(tiers))]
				var gpus []int
				if op == 0 {
					gpus = r.Perm(n)[:1+r.IntN(3)]
				} else if p, err := s.Plan(1+r.IntN(3), tier, Span{now, now.Add(time.Hour)}, now); err == nil {
					gpus = p
				} else {
					continue
				}
				start := now
				if tier == auction.Gold && r.IntN(2) == 0 {
					start = now.Add(time.Duration(r.IntN(7200)) * time.Second)
				}
				l := mkLease(job, tier, len(gpus), start, time.Duration(10+r.IntN(80))*time.Minute)
				end := time.Unix(l.End, 0)
				acts, err := s.Claim(l, gpus, now)
				if err != nil {
					m.refused(tier, gpus, start, end, now, err)
					continue
				}
				m.claimed(job, tier, gpus, start, end, now, acts)
				jobs = append(jobs, job)
				if r.IntN(3) > 0 {
					startJob(job)
				}
			case op < 5 && len(jobs) > 0:
				startJob(jobs[r.IntN(len(jobs))])
			case op < 6 && len(jobs) > 0:
				j := jobs[r.IntN(len(jobs))]
				if !m.released[j] {
					acts := s.Release(j, now)
					m.release(j)
					m.acted(acts)
				}
			case op < 7:
				out := map[int]string{}
				for g := range n {
					if m.out[g] = r.IntN(6) == 0; m.out[g] {
						out[g] = "owner"
					}
				}
				m.acted(s.SetAvailability(availability(n, out), now))
			default:
				now = now.Add(time.Duration(r.IntN(120)) * time.Second)
				m.acted(s.Tick(now))
			}
			checkCommitments(t, s, now)
		}
	}
	for k := Launch; k <= StopAtEnd; k++ {
		if kinds[k] == 0 {
			t.Errorf("no %s in any run: the properties were not exercised", k)
		}
	}
	if backfills == 0 || reserved == 0 {
		t.Errorf("%d backfills, %d preemptions for a reservation: the calendar was not exercised", backfills, reserved)
	}
	t.Logf("actions checked: %v; %d backfills, %d preempted for a reservation", kinds, backfills, reserved)
}

// overrun: a is a lease past its end, held until its caller releases it
// (Commitments shows it ending just after now), and b began at its end or
// later: the overlap is a stop that has not finished, which b's launch
// waits for (the model checks that), not a GPU sold twice.
func overrun(a, b Commitment, now time.Time) bool {
	return a.Span.End.Equal(now.Add(time.Nanosecond)) && !b.Span.Start.After(now) && b.Span.Start.After(a.Span.Start)
}

// checkCommitments: the scheduler's own records never overlap per GPU.
func checkCommitments(t *testing.T, s *Scheduler, now time.Time) {
	t.Helper()
	byGPU := map[int][]Commitment{}
	for _, c := range s.Commitments(now) {
		for _, o := range byGPU[c.GPU] {
			if o.Span.overlaps(c.Span) && !overrun(o, c, now) && !overrun(c, o, now) {
				t.Fatalf("GPU %d at %v: %s (%s) %v..%v overlaps %s (%s) %v..%v", c.GPU, now, o.JobID, o.Tier, o.Span.Start, o.Span.End, c.JobID, c.Tier, c.Span.Start, c.Span.End)
			}
		}
		byGPU[c.GPU] = append(byGPU[c.GPU], c)
	}
}
