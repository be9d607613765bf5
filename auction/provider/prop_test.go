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
	holder   map[int]string   // the lease a GPU is committed to now
	occupied map[int][]string // leases given the GPU and not yet released
	out      map[int]bool     // withdrawn by the owner
	starts   map[string]int
	launches map[string]int
	endings  map[string]int
	released map[string]bool
	kinds    map[Kind]int // actions seen, to show the run covers them all
}

// claimed checks a successful claim against the model: each GPU was free
// or held by bronze and the claim is above bronze. Anything else is a GPU
// committed to two leases at once.
func (m *model) claimed(job string, tier auction.Tier, gpus []int, acts []Action) {
	var yielded []string
	for _, g := range gpus {
		if m.out[g] {
			m.t.Fatalf("%s claimed withdrawn GPU %d", job, g)
		}
		if h := m.holder[g]; h != "" {
			if m.tier[h] != auction.Bronze || tier == auction.Bronze {
				m.t.Fatalf("GPU %d committed to %s (%s) and %s (%s)", g, h, m.tier[h], job, tier)
			}
			yielded = append(yielded, h)
		}
		m.holder[g], m.occupied[g] = job, append(m.occupied[g], job)
	}
	m.tier[job] = tier
	for _, a := range acts {
		if !slices.Contains(yielded, a.JobID) {
			m.t.Fatalf("%s preempted %s, which held none of %v", job, a.JobID, gpus)
		}
	}
	m.acted(acts)
}

// refused checks that a refused claim had a reason.
func (m *model) refused(tier auction.Tier, gpus []int, err error) {
	switch {
	case errors.Is(err, ErrRaced):
		if !slices.ContainsFunc(gpus, func(g int) bool {
			h := m.holder[g]
			return h != "" && !(m.tier[h] == auction.Bronze && tier != auction.Bronze)
		}) {
			m.t.Fatalf("claim of %v at %s refused as raced, but every GPU was free or yields", gpus, tier)
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
			for g, occ := range m.occupied {
				if slices.Contains(occ, j) && len(occ) > 1 {
					m.t.Fatalf("%s launched on GPU %d that %v still occupy", j, g, occ)
				}
			}
		}
	}
}

func (m *model) release(job string) {
	m.released[job] = true
	for g, occ := range m.occupied {
		m.occupied[g] = slices.DeleteFunc(occ, func(x string) bool { return x == job })
		if m.holder[g] == job {
			m.holder[g] = ""
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
	kinds := map[Kind]int{}
	for seed := range 60 {
		r := rand.New(rand.NewPCG(uint64(seed), 3))
		const n = 6
		s := newSched(n)
		s.SetWindows([]auction.Window{{Start: t0.Unix(), End: at(90 * time.Minute).Unix()}, {Start: at(100 * time.Minute).Unix(), End: at(24 * time.Hour).Unix()}}, t0)
		m := &model{t: t, tier: map[string]auction.Tier{}, holder: map[int]string{}, occupied: map[int][]string{},
			out: map[int]bool{}, starts: map[string]int{}, launches: map[string]int{}, endings: map[string]int{}, released: map[string]bool{}, kinds: kinds}
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
					start = now.Add(time.Duration(r.IntN(600)) * time.Second)
				}
				l := mkLease(job, tier, len(gpus), start, time.Duration(10+r.IntN(80))*time.Minute)
				acts, err := s.Claim(l, gpus, now)
				if err != nil {
					m.refused(tier, gpus, err)
					continue
				}
				m.claimed(job, tier, gpus, acts)
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
	t.Logf("actions checked: %v", kinds)
}

// checkCommitments: the scheduler's own records never overlap per GPU.
func checkCommitments(t *testing.T, s *Scheduler, now time.Time) {
	t.Helper()
	byGPU := map[int][]Commitment{}
	for _, c := range s.Commitments(now) {
		for _, o := range byGPU[c.GPU] {
			if o.Span.overlaps(c.Span) {
				t.Fatalf("GPU %d: %s %v..%v overlaps %s %v..%v", c.GPU, o.JobID, o.Span.Start, o.Span.End, c.JobID, c.Span.Start, c.Span.End)
			}
		}
		byGPU[c.GPU] = append(byGPU[c.GPU], c)
	}
}
