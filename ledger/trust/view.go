package trust

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/attest"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
)

// Outcome scores: what one lease's end says about its provider. Only
// objective proofs (fraud proofs) penalise automatically; everything here
// only moves a score.
var outcomeScore = map[ledger.OutcomeResult]float64{
	ledger.OutcomeCompleted: 1,
	ledger.OutcomePreempted: 0.7, // with notice, as the tier allows
	ledger.OutcomeFailed:    0.3, // the job's own exit code may be to blame
	ledger.OutcomeAbandoned: 0,   // the provider vanished mid-job
}

// Evidence is what the ledger says about one peer, as this node reads it.
type Evidence struct {
	Peer     string                       `json:"peer"`
	Score    *float64                     `json:"score"` // nil: no paid history, no reputation
	Outcomes map[ledger.OutcomeResult]int `json:"outcomes"`
	// PaidTotal is what its leases were paid, as settlements and the
	// renters' own vouchers prove it: a settlement's charge, not the
	// prepaid part it refunded.
	PaidTotal auction.Credits `json:"paid_total" doc:"micro-credits (auction.Credits; 1 credit = 1000000) paid on its leases"`
	Leases    int             `json:"leases"`
	Frozen    bool            `json:"frozen"` // its feed carries an equivocation proof
	// Payments is its record as a renter, from its providers' settlements:
	// "paid" leases and "unpaid" ones (stopped for want of vouchers).
	Payments map[string]int `json:"payments,omitempty"`
	// Probes are known-answer checks run on it as a provider: "passed",
	// "failed".
	Probes map[ledger.ProbeResult]int `json:"probes,omitempty"`
	// Convictions are objective fraud proofs against it (double lease,
	// contradicted hardware claim, double-spent voucher). A convicted peer
	// has no score and gets no awards.
	Convictions []ledger.Verdict `json:"convictions,omitempty"`
	Claim       *attest.Claim    `json:"hardware_claim,omitempty"`
	// CanaryStreak is how many of this node's canaries the peer passed in
	// a row since its last failure; it sets how often the next one comes.
	CanaryStreak int `json:"canary_streak,omitempty"`
	// Telemetry is what renters' digests say of its signed telemetry.
	Telemetry *TelemetryRecord `json:"telemetry,omitempty"`
	// Since is when its feed began (its first entry, by its own clock):
	// the identity's age.
	Since *time.Time `json:"since,omitempty"`
}

// View computes every peer's reputation from the replicated
// feeds: a rating per outcome a renter journaled, backed by the provider's
// own settlement (which embeds the renter-signed voucher) for that lease;
// a rating of each renter by its provider's settlement; probe results; and
// the objective fraud checks. It is cached briefly: auctions ask for it
// often, the ledger changes slowly.
type View struct {
	st   Reader
	self string
	// now is the clock (nil: the wall clock): the cache's age and the
	// scores' decay are read from it, so a simulator can run the view in
	// virtual time.
	now func() time.Time
	// record hands an entry to self's journal without waiting (false: the
	// journal is full or closed, and the next pass offers it again); nil:
	// this view journals nothing. Reading a score never appends itself.
	record func(typ string, payload []byte) bool

	// spawn runs a recomputation in the background (RefreshInBackground);
	// nil: a stale view is recomputed by the reader that finds it.
	spawn func(func()) bool
	// published is the latest pass's scores and evidence, which readers
	// of them take without waiting for a pass under way (they are never
	// changed once published); refreshing is set while a background pass
	// is queued or running, so that stale reads queue one, not many.
	published  atomic.Pointer[scores]
	refreshing atomic.Bool

	mu   sync.Mutex // guards everything below: the passes and what they fold
	at   time.Time
	sc   map[string]float64
	ev   map[string]*Evidence
	fs   *fraudScan
	fold *ledgerFold // what earlier passes read, so each reads only what is new
	// journaled are proofs this node has already appended, so that a
	// conflict it found is journaled once however often it recomputes;
	// checked are double-lease proofs whose signatures were checked (nil:
	// they do not verify).
	journaled map[string]bool
	checked   map[string]*ledger.Verdict
}

// NewView is the reputation view of self over the ledger r. record hands
// an entry (a fraud proof self has standing to journal) to self's journal
// without waiting; nil journals nothing. now is the clock; nil is the
// wall clock.
func NewView(r Reader, self string, record func(typ string, payload []byte) bool, now func() time.Time) *View {
	return &View{st: r, self: self, record: record, now: now}
}

func (v *View) clock() time.Time {
	if v.now == nil {
		return time.Now()
	}
	return v.now()
}

// scores is one pass's result as readers see it.
type scores struct {
	at time.Time
	sc map[string]float64
	ev map[string]*Evidence
}

// staleAfter is how long a pass's result serves before the next pass.
const staleAfter = 5 * time.Second

// RefreshInBackground makes stale reads of scores and evidence (Get,
// Score, Convicted, CanaryStreak) answer at once from the latest pass and
// queue the next pass through spawn (the node's task group; false: it is
// stopping, and the read computes nothing), instead of recomputing inline
// while the reader waits: an auction ranking bids never waits for a pass
// over the ledger (issue 33). Only the very first read computes inline.
// Call it before the view is shared. The simulator leaves it off, so its
// passes happen at the same virtual instants on every run.
func (v *View) RefreshInBackground(spawn func(func()) bool) { v.spawn = spawn }

// Get is every peer's score (peers with a paid history and no conviction)
// and the evidence behind it, as of the latest pass.
func (v *View) Get() (map[string]float64, map[string]*Evidence) {
	if v.spawn != nil {
		if p := v.published.Load(); p != nil {
			if v.clock().Sub(p.at) >= staleAfter {
				v.refreshLater()
			}
			return p.sc, p.ev
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refresh(false)
	return v.sc, v.ev
}

// refreshLater queues one background pass, unless one is queued already.
func (v *View) refreshLater() {
	if !v.refreshing.CompareAndSwap(false, true) {
		return
	}
	queued := v.spawn(func() {
		defer v.refreshing.Store(false)
		v.mu.Lock()
		defer v.mu.Unlock()
		v.refresh(false) // a reader may have refreshed meanwhile (ClaimOf)
	})
	if !queued {
		v.refreshing.Store(false)
	}
}

// refresh recomputes when the cache is stale or force is set, and
// publishes the result; mu is held.
func (v *View) refresh(force bool) {
	if !force && v.clock().Sub(v.at) < staleAfter && v.sc != nil {
		return
	}
	v.sc, v.ev, v.fs = v.compute()
	v.at = v.clock()
	v.published.Store(&scores{at: v.at, sc: v.sc, ev: v.ev})
}

// Score implements auction.Reputation: peers without reputation score 0,
// so a fresh identity never ranks above one with a clean paid history.
func (v *View) Score(provider string) float64 {
	sc, _ := v.Get()
	return sc[provider]
}

// Convicted reports whether an objective fraud proof stands against p.
func (v *View) Convicted(p string) bool {
	_, ev := v.Get()
	e, ok := ev[p]
	return ok && (len(e.Convictions) > 0 || e.Frozen)
}

// Settlements are the proven settlements in the ledger (see
// settlementProven), as of the latest pass.
func (v *View) Settlements() []SettlementAt {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refresh(false)
	return slices.Clone(v.fold.settlements)
}

// CanaryStreak is p's current run of passed canaries (see node's
// CanaryRate).
func (v *View) CanaryStreak(p string) int {
	_, ev := v.Get()
	if e, ok := ev[p]; ok {
		return e.CanaryStreak
	}
	return 0
}

// ProofAgainst is one proof that convicts p, to verify offline.
func (v *View) ProofAgainst(p string) ([]byte, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refresh(false)
	b, ok := v.fs.raw[p]
	return b, ok
}

// ClaimOf is p's latest hardware claim and the signed entry stating it.
// A claim not yet replicated forces one recomputation: the renter asks
// when a provider's first sample arrives, just after syncing its feed.
func (v *View) ClaimOf(p string) (ClaimRef, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.refresh(false)
	c, ok := v.fs.claims[p]
	if !ok && v.clock().Sub(v.at) > 2*time.Second {
		v.refresh(true)
		c, ok = v.fs.claims[p]
	}
	return c, ok
}

func (v *View) compute() (map[string]float64, map[string]*Evidence, *fraudScan) {
	st := v.st
	ev := map[string]*Evidence{}
	evOf := func(p string) *Evidence {
		if e, ok := ev[p]; ok {
			return e
		}
		e := &Evidence{Peer: p, Outcomes: map[ledger.OutcomeResult]int{}}
		ev[p] = e
		return e
	}
	if v.fold == nil {
		v.fold = newLedgerFold()
	}
	// On a store error, what was folded stays (each feed is folded whole
	// or not at all): forgetting it would make convicted peers awardable.
	if ok, err := v.fold.catchUp(st); err == nil && !ok {
		v.fold = newLedgerFold()
		_, _ = v.fold.catchUp(st)
	}
	f := v.fold
	for a := range f.frozen {
		evOf(a).Frozen = true // an equivocator's feed is evidence of nothing
	}
	outcomes, settlements, probes, paid, charged, fs := f.outcomes, f.settlements, f.probes, f.paid, f.charged, f.fs
	self := v.self
	var ratings []ledger.Rating
	paidBy := map[string]auction.Credits{}
	for _, oa := range outcomes {
		e := evOf(oa.o.Provider)
		e.Outcomes[oa.o.Result]++
		e.Leases++
		score, rated := outcomeScore[oa.o.Result]
		// What was paid: the settled total or the renter's own voucher, the
		// larger. A good outcome weighs the provider's charge instead,
		// where its settlement states one (the renter's newest voucher is
		// a cap it authorised, the rest refunded; weighing it would let a
		// colluding pair sign a large voucher, refund nearly all of it and
		// keep the weight). A bad one never weighs less than the renter's
		// voucher, so a provider cannot erase it by charging nothing, and
		// a bad gold one never less than one billing interval of the lease
		// both signed: a reservation the provider did not honour cost the
		// renter its window though nothing was paid. (Not silver or bronze:
		// a job that never started there cost nobody a window, and a
		// renter could otherwise mark providers down for free with a spec
		// no one can run.)
		amount := max(paid[oa.o.Lease], rendered(oa.o, oa.by))
		if charged[oa.o.Lease] && score >= 1 {
			amount = paid[oa.o.Lease]
		}
		if l, ok := fs.verifiedLease(oa.o.Lease); rated && score < 1 && ok && l.Tier == auction.Gold && l.Renter == oa.by && l.Provider == oa.o.Provider {
			amount = max(amount, sched.IntervalPrice(l))
		}
		e.PaidTotal += amount
		if !rated || amount <= 0 {
			continue // unpaid or cancelled leases carry no weight
		}
		ratings = append(ratings, ledger.Rating{Rater: oa.by, Subject: oa.o.Provider, Lease: oa.o.Lease, Paid: amount, Score: score, Time: oa.time})
		if oa.by == self {
			paidBy[oa.o.Provider] += amount
		}
	}
	ratings = append(ratings, renterRatings(settlements, fs, evOf)...)
	ratings = append(ratings, probeRatings(probes, fs, evOf)...)
	for p, n := range canaryStreaks(self, probes) {
		evOf(p).CanaryStreak = n
	}
	for p, t := range f.telemetry {
		t := *t
		evOf(p).Telemetry = &t
	}
	for author, c := range fs.claims {
		c := c.Claim
		evOf(author).Claim = &c
	}
	v.convict(self, fs, evOf)
	for a, ts := range f.since {
		if e, ok := ev[a]; ok {
			t := time.Unix(ts, 0).UTC()
			e.Since = &t
		}
	}
	sc := ledger.Reputation(self, ratings, paidBy, v.clock())
	for p, s := range sc {
		e := evOf(p)
		if len(e.Convictions) > 0 || e.Frozen {
			delete(sc, p) // objective fraud: no reputation at all
			continue
		}
		s := s
		e.Score = &s
	}
	return sc, ev, fs
}

// maxCheckedProofs bounds the memo of checked double-lease proofs.
const maxCheckedProofs = 4096

// SettlementAt is a proven settlement as the ledger holds it: who
// journaled it (the provider) and when, by its own clock (unix seconds).
type SettlementAt struct {
	Settlement ledger.Settlement
	By         string // the provider
	Time       int64
}

// renterRatings turns providers' settlements into ratings of renters: a
// lease paid to the end rates 1, one stopped for want of vouchers 0. It
// weighs what was paid (the settlement's charge, Settlement.Paid) or, for
// an unpaid lease, the interval the provider worked unpaid; only leases
// both sides signed count.
func renterRatings(settlements []SettlementAt, fs *fraudScan, evOf func(string) *Evidence) []ledger.Rating {
	var out []ledger.Rating
	for _, s := range settlements {
		ref, ok := fs.leases[s.Settlement.Lease]
		if !ok || ref.lease == nil || ref.lease.Provider != s.By || ref.lease.Renter != s.Settlement.Renter {
			continue
		}
		e := evOf(s.Settlement.Renter)
		if e.Payments == nil {
			e.Payments = map[string]int{}
		}
		score, amount := 1.0, s.Settlement.Paid()
		if s.Settlement.Unpaid {
			score, amount = 0, max(amount, sched.IntervalPrice(ref.lease))
			e.Payments["unpaid"]++
		} else {
			e.Payments["paid"]++
		}
		if amount > 0 {
			out = append(out, ledger.Rating{Rater: s.By, Subject: s.Settlement.Renter, Lease: s.Settlement.Lease, Paid: amount, Score: score, Time: s.Time})
		}
	}
	return out
}

// convict gathers the objective proofs: journaled ones, and double leases
// this node finds itself. A renter whose own lease was double-sold
// journals the proof, so that nodes that never held the leases learn it.
func (v *View) convict(self string, fs *fraudScan, evOf func(string) *Evidence) {
	for accused, vs := range fs.proofs {
		evOf(accused).Convictions = append(evOf(accused).Convictions, vs...)
	}
	if v.journaled == nil {
		v.journaled, v.checked = map[string]bool{}, map[string]*ledger.Verdict{}
	}
	for _, dl := range fs.doubleLeases() {
		p := dl.proof
		// The scan read leases without their signatures: a conflict
		// convicts only if both leases really carry both signatures. Each
		// proof is checked once, not on every pass.
		verdict, seen := v.checked[string(p)]
		if !seen {
			if vd, err := ledger.VerifyDoubleLease(p); err == nil {
				verdict = &vd
			}
			if len(v.checked) >= maxCheckedProofs {
				clear(v.checked)
			}
			v.checked[string(p)] = verdict
		}
		if verdict == nil {
			continue
		}
		evOf(verdict.Author).Convictions = append(evOf(verdict.Author).Convictions, *verdict)
		if fs.raw[verdict.Author] == nil {
			fs.raw[verdict.Author] = p
		}
		if fs.seen[string(p)] || v.journaled[string(p)] || v.record == nil || (dl.renters[0] != self && dl.renters[1] != self) {
			continue
		}
		if v.record(ledger.TypeFraudProof, p) {
			v.journaled[string(p)] = true
		}
	}
}

// rendered is what the renter's own voucher in an outcome proves it paid:
// signed by the rater, for that lease and provider.
func rendered(o ledger.Outcome, renter string) auction.Credits {
	if len(o.Voucher) == 0 {
		return 0
	}
	v, err := ledger.ReadVoucher(o.Voucher) // checked when stored (ledger.CheckPayload)
	if err != nil || v.Lease != o.Lease || v.Renter != renter || v.Provider != o.Provider {
		return 0
	}
	return v.Total
}
