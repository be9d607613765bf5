package provider

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// A week of one provider in virtual time: renters arrive, quote, claim,
// start, pay (or stop paying); the owner reclaims GPUs and closes the
// machine twice a day; the caller carries out every action as node would.

const (
	simGPUs = 8
	simWeek = 7 * 24 * time.Hour
	simPull = 3 * time.Second // launch to running
	simStop = 2 * time.Second // a stop to the container's exit
)

type simPlan struct {
	id       string
	renter   string
	arrive   time.Duration
	tier     auction.Tier
	gpus     int
	dur      time.Duration // the lease's length
	work     time.Duration // how long the job runs before it exits by itself
	lead     time.Duration // gold: from the award to the reservation's start
	billing  int64
	price    auction.Credits
	pays     int           // vouchers the renter sends; -1: every one
	payLate  time.Duration // how late each voucher comes, under half the grace
	noStart  bool          // the renter never starts its award
	reclaim  bool          // not a job: the owner takes GPU gpus for dur
	reclaimG int
}

type workload struct {
	plans   []simPlan
	windows []auction.Window
	// offer is the owner's prices: floors, weekday evening and weekend
	// peaks, and a surge with utilisation capped at 2x. A renter's plan
	// price is its max_price; the lease is priced as the provider quotes.
	offer *auction.Offer
}

// simOffer prices the simulated provider's week as an owner who sells
// evenings and weekends above their nights would.
func simOffer() *auction.Offer {
	return &auction.Offer{
		Prices: auction.Prices{Gold: 1_200_000, Silver: 900_000, Bronze: 400_000},
		Pricing: &auction.Pricing{TimeZone: "Europe/Berlin", SurgeBP: 5_000, CapBP: 2 * auction.BP, Periods: []auction.PricePeriod{
			{Weekly: auction.WeeklyWindow{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "17:00", End: "22:00"}, MultBP: 15_000},
			{Weekly: auction.WeeklyWindow{Days: []string{"sat", "sun"}, Start: "10:00", End: "18:00"}, Floors: auction.Prices{Gold: 2_500_000}},
		}},
	}
}

// newWorkload draws a week: a job every 40 minutes on average, half of
// them bronze, a sixth of the renters stop paying, the owner reclaims a
// GPU about twice a day and closes the machine 07:00-08:00 and
// 19:00-20:00 every day.
func newWorkload(seed uint64) *workload {
	r := rand.New(rand.NewPCG(seed, 42))
	w := &workload{offer: simOffer()}
	for d := range 8 {
		day := t0.Add(time.Duration(d) * 24 * time.Hour)
		for _, h := range [][2]int{{0, 7}, {8, 19}, {20, 24}} {
			w.windows = append(w.windows, auction.Window{Start: day.Add(time.Duration(h[0]) * time.Hour).Unix(), End: day.Add(time.Duration(h[1]) * time.Hour).Unix()})
		}
	}
	for t, n := time.Duration(0), 0; t < simWeek; n++ {
		t += time.Duration(r.ExpFloat64() * float64(40*time.Minute))
		p := simPlan{id: fmt.Sprint("job", n), renter: fmt.Sprint("renter", n), arrive: t, gpus: []int{1, 1, 1, 2, 2, 4}[r.IntN(6)],
			dur:     time.Duration(10+r.IntN(230)) * time.Minute,
			billing: []int64{300, 600, 900, 1800}[r.IntN(4)], price: auction.Credits(500_000 + r.IntN(3_500_000)), pays: -1}
		switch x := r.IntN(20); {
		case x < 10:
			p.tier = auction.Bronze
		case x < 17:
			p.tier = auction.Silver
		default:
			p.tier, p.lead = auction.Gold, time.Duration(1+r.IntN(20))*time.Minute
		}
		p.work = time.Duration(float64(p.dur) * (0.2 + r.Float64()))
		switch x := r.IntN(30); {
		case x < 5:
			p.pays = r.IntN(3)
		case x < 6:
			p.noStart = true
		}
		p.payLate = time.Duration(r.Int64N(int64(Grace(&auction.Lease{BillingSec: p.billing}) / 2)))
		w.plans = append(w.plans, p)
		if r.IntN(12) == 0 {
			w.plans = append(w.plans, simPlan{reclaim: true, arrive: t + time.Minute, reclaimG: r.IntN(simGPUs),
				dur: time.Duration(20+r.IntN(40)) * time.Minute})
		}
	}
	slices.SortStableFunc(w.plans, func(a, b simPlan) int { return cmp.Compare(a.arrive, b.arrive) })
	return w
}

// simJob is what the simulation knows of one lease.
type simJob struct {
	p                  *simPlan
	idx                int32 // in sim.order
	l                  *auction.Lease
	lease              auction.Lease // l points here
	gpus               []int
	running            bool
	runAt              time.Time
	paid               int
	paused             bool
	pausedAt           time.Time
	pauseMax           time.Duration
	pauses             []time.Time
	ending             Kind
	endAt              time.Time // the ending action, or the job's own exit
	endings, releases  int
	afterRelease       int // actions for it after its release (a bug)
	launches, launchOK int // launches, and those on GPUs no launched job still occupied
	launchAt           time.Time
	exited             bool // it exited by itself
	refused            bool // its start was refused: bronze, inside its notice before the window closes
}

type evKind uint8

const (
	evArrive evKind = iota
	evStart
	evRunning
	evVoucher
	evExit
	evRelease
	evReclaim
	evReturn
)

// event holds no pointers, so the heap moves it without write barriers.
type event struct {
	at   int64 // unix nanoseconds: cheaper to order than time.Time
	seq  int32
	kind evKind
	ref  int32 // the job (an index of sim.order) or, to arrive and return, the plan
}

// events is a binary min-heap by (at, seq), typed to stay cheap.
type events []event

func (e events) less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].seq < e[j].seq
}

func (e *events) push(x event) {
	*e = append(*e, x)
	h := *e
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (e *events) pop() event {
	h := *e
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.less(c+1, c) {
			c++
		}
		if !h.less(c, i) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	*e = h
	return top
}

// sim runs one workload against one scheduler.
type sim struct {
	s        *Scheduler
	w        *workload
	q        events
	seq      int32
	now      time.Time
	jobs     map[string]*simJob
	order    []*simJob
	pool     []simJob           // backs order: one allocation a week
	occupied [simGPUs][]*simJob // launched on the GPU, not yet released
	out      map[int]string
	declined int
	peak     int // leases priced above their tier's base floor
	kinds    map[Kind]int
	reasons  map[string]int
}

func (m *sim) after(d time.Duration, k evKind, ref int32) {
	m.seq++
	m.q.push(event{at: m.now.Add(d).UnixNano(), seq: m.seq, kind: k, ref: ref})
}

func runWeek(w *workload) *sim { return new(sim).run(w) }

// run simulates w on a new scheduler. A sim may run again: it keeps its
// buffers, so a benchmark measures the scheduler and not the harness's
// allocations.
func (m *sim) run(w *workload) *sim {
	m.s, m.w, m.now, m.seq, m.declined, m.peak = New(WithRetention(2*simWeek)), w, t0, 0, 0, 0
	if m.jobs == nil {
		m.jobs, m.out, m.kinds, m.reasons = map[string]*simJob{}, map[int]string{}, map[Kind]int{}, map[string]int{}
	}
	clear(m.jobs)
	clear(m.out)
	clear(m.kinds)
	clear(m.reasons)
	if cap(m.pool) < len(w.plans) {
		m.pool = make([]simJob, 0, len(w.plans)) // never grows: order points into it
	}
	m.pool, m.order, m.q = m.pool[:0], m.order[:0], m.q[:0]
	for g := range m.occupied {
		m.occupied[g] = m.occupied[g][:0]
	}
	m.s.SetAvailability(availability(simGPUs, nil), t0)
	m.s.SetWindows(w.windows, t0)
	// One arrival is pending at a time (plans are in arrival order): the
	// heap holds only what is in flight.
	m.after(w.plans[0].arrive, evArrive, 0)
	for {
		due := m.s.Due()
		if len(m.q) == 0 && due.IsZero() {
			return m
		}
		if !due.IsZero() && (len(m.q) == 0 || due.UnixNano() <= m.q[0].at) {
			m.now = later(m.now, due)
			m.do(m.s.Tick(m.now))
			continue
		}
		ev := m.q.pop()
		m.now = time.Unix(0, ev.at).UTC()
		m.handle(ev)
	}
}
