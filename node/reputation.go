package node

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// Outcome scores: what one lease's end says about its provider. Only
// objective proofs (fraud proofs) penalise automatically; everything here
// only moves a score.
var outcomeScore = map[string]float64{
	StateCompleted: 1,
	"preempted":    0.7, // with notice, as the tier allows
	StateFailed:    0.3, // the job's own exit code may be to blame
	"abandoned":    0,   // the provider vanished mid-job
}

// Evidence is what the ledger says about one peer, as this node reads it.
type Evidence struct {
	Peer      string         `json:"peer"`
	Score     *float64       `json:"score"` // nil: no paid history, no reputation
	Outcomes  map[string]int `json:"outcomes"`
	PaidTotal float64        `json:"paid_total"` // credits settled on its leases
	Leases    int            `json:"leases"`
	Frozen    bool           `json:"frozen"` // its feed carries an equivocation proof
}

// reputationView computes every peer's reputation from the replicated
// feeds: a rating per outcome a renter journaled, backed by the provider's
// own settlement (which embeds the renter-signed voucher) for that lease.
// It is cached briefly: auctions ask for it often, the ledger changes
// slowly.
type reputationView struct {
	n  *Node
	mu sync.Mutex // guards at, scores, ev
	at time.Time
	sc map[string]float64
	ev map[string]*Evidence
}

func (v *reputationView) get() (map[string]float64, map[string]*Evidence) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if time.Since(v.at) < 5*time.Second && v.sc != nil {
		return v.sc, v.ev
	}
	v.sc, v.ev = v.compute()
	v.at = time.Now()
	return v.sc, v.ev
}

// Score implements auction.Reputation: peers without reputation score 0,
// so a fresh identity never ranks above one with a clean paid history.
func (v *reputationView) Score(provider string) float64 {
	sc, _ := v.get()
	return sc[provider]
}

func (v *reputationView) compute() (map[string]float64, map[string]*Evidence) {
	st := v.n.ledger
	ev := map[string]*Evidence{}
	evOf := func(p string) *Evidence {
		if e, ok := ev[p]; ok {
			return e
		}
		e := &Evidence{Peer: p, Outcomes: map[string]int{}}
		ev[p] = e
		return e
	}
	type outcomeAt struct {
		o    Outcome
		by   string
		time int64
	}
	var outcomes []outcomeAt
	paid := map[string]auction.Credits{} // lease CID -> settled total
	_ = scanLedger(st, func(e *ledger.Entry, frozen bool) {
		if frozen {
			evOf(e.Author).Frozen = true
			return // an equivocator's feed is evidence of nothing
		}
		switch e.Type {
		case ledger.TypeOutcome:
			var o Outcome
			if json.Unmarshal(e.Payload, &o) == nil && o.Provider != "" {
				outcomes = append(outcomes, outcomeAt{o, e.Author, e.Time})
			}
		case ledger.TypeSettlement:
			var s Settlement
			if json.Unmarshal(e.Payload, &s) == nil && s.Lease != "" && settlementProven(s, e.Author) {
				paid[s.Lease] = auction.Credits(s.Total * 1e6)
			}
		}
	})
	self := v.n.host.ID().String()
	var ratings []ledger.Rating
	paidBy := map[string]auction.Credits{}
	for _, oa := range outcomes {
		e := evOf(oa.o.Provider)
		e.Outcomes[oa.o.Result]++
		e.Leases++
		score, rated := outcomeScore[oa.o.Result]
		amount := max(paid[oa.o.Lease], rendered(oa.o, oa.by))
		e.PaidTotal += float64(amount) / 1e6
		if !rated || amount <= 0 {
			continue // unpaid or cancelled leases carry no weight
		}
		ratings = append(ratings, ledger.Rating{Rater: oa.by, Subject: oa.o.Provider, Lease: oa.o.Lease, Paid: amount, Score: score, Time: oa.time})
		if oa.by == self {
			paidBy[oa.o.Provider] += amount
		}
	}
	sc := ledger.Reputation(self, ratings, paidBy, time.Now())
	for p, s := range sc {
		s := s
		evOf(p).Score = &s
	}
	return sc, ev
}

// settlementProven checks that a provider's settlement embeds a voucher the
// renter signed for that lease and total: a provider cannot invent the
// payments that weigh its ratings.
func settlementProven(s Settlement, provider string) bool {
	if len(s.Voucher) == 0 {
		return false
	}
	v, _, err := ledger.DecodeSignedVoucher(s.Voucher)
	return err == nil && v.Lease == s.Lease && v.Provider == provider && v.Renter == s.Renter &&
		float64(v.Total)/1e6 == s.Total
}

// rendered is what the renter's own voucher in an outcome proves it paid:
// signed by the rater, for that lease and provider.
func rendered(o Outcome, renter string) auction.Credits {
	if len(o.Voucher) == 0 {
		return 0
	}
	v, _, err := ledger.DecodeSignedVoucher(o.Voucher)
	if err != nil || v.Lease != o.Lease || v.Renter != renter || v.Provider != o.Provider {
		return 0
	}
	return v.Total
}
