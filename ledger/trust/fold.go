package trust

import (
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// ledgerFold is everything reputation reads from the replicated ledger,
// accumulated entry by entry. Feeds only grow, so each pass folds in what
// was appended since the last one instead of re-reading (and re-checking
// the vouchers of) every entry: a pass over a large ledger costs what
// changed. A feed frozen since the last pass throws the fold away, because
// an equivocator's whole feed must stop counting.
type ledgerFold struct {
	seen        map[string]uint64 // author -> last seq folded in
	frozen      map[string]bool
	outcomes    []outcomeAt
	settlements []SettlementAt
	probes      []probeAt
	paid        map[string]auction.Credits // lease CID -> what its settlement says was paid (Settlement.Paid)
	charged     map[string]bool            // lease CID -> its settlement states a charge (refunds the rest)
	fs          *fraudScan
	telemetry   map[string]*TelemetryRecord // provider -> what renters' digests say
	since       map[string]int64            // author -> time of its feed's first entry
}

// TelemetryRecord sums the renters' telemetry digests of one provider's
// runs: how many signed samples verified and how many were rejected.
type TelemetryRecord struct {
	Runs     int `json:"runs"`
	Samples  int `json:"samples"`
	Rejected int `json:"rejected"`
}

type outcomeAt struct {
	o    ledger.Outcome
	by   string // the renter
	time int64
}

func newLedgerFold() *ledgerFold {
	return &ledgerFold{seen: map[string]uint64{}, frozen: map[string]bool{},
		paid: map[string]auction.Credits{}, charged: map[string]bool{}, fs: newFraudScan(),
		telemetry: map[string]*TelemetryRecord{}, since: map[string]int64{}}
}

// catchUp folds in every entry stored since the last call. It returns
// false, having folded nothing, when a feed it already folded is now
// frozen: the caller starts over with a new fold.
func (f *ledgerFold) catchUp(st Reader) (bool, error) {
	heads, err := st.Heads()
	if err != nil {
		return true, err
	}
	for _, h := range heads {
		if f.frozen[h.Author] {
			continue
		}
		if _, frozen := st.Frozen(h.Author); frozen {
			if f.seen[h.Author] > 0 {
				return false, nil
			}
			f.frozen[h.Author] = true
			continue
		}
		from := f.seen[h.Author] + 1
		if from > h.Seq {
			continue
		}
		err := st.Walk(h.Author, from, h.Seq, func(e *ledger.Entry, se *ledger.SignedEntry) error {
			f.add(e, se)
			return nil
		})
		if err != nil {
			return true, err
		}
		f.seen[h.Author] = h.Seq
	}
	return true, nil
}

func (f *ledgerFold) add(e *ledger.Entry, se *ledger.SignedEntry) {
	f.fs.add(e, se)
	if e.Seq == 1 {
		f.since[e.Author] = e.Time
	}
	switch e.Type {
	case ledger.TypeTelemetryDigest:
		if d, err := ledger.DecodePayload[ledger.TelemetryDigest](e.Payload); err == nil && d.Provider != "" && d.Provider != e.Author {
			t := f.telemetry[d.Provider]
			if t == nil {
				t = &TelemetryRecord{}
				f.telemetry[d.Provider] = t
			}
			t.Runs++
			t.Samples += d.Summary.Samples
			t.Rejected += d.Summary.Rejected
		}
	case ledger.TypeOutcome:
		if o, err := ledger.DecodePayload[ledger.Outcome](e.Payload); err == nil && o.Provider != "" {
			f.outcomes = append(f.outcomes, outcomeAt{*o, e.Author, e.Time})
			f.fs.ended(o.Lease, e)
		}
	case ledger.TypeSettlement:
		s, err := ledger.DecodePayload[ledger.Settlement](e.Payload)
		if err != nil || s.Lease == "" {
			return
		}
		f.fs.ended(s.Lease, e) // a settlement ends a lease whether or not it was paid
		if s.Proven(e.Author) {
			f.paid[s.Lease], f.charged[s.Lease] = s.Paid(), s.Charged != nil
			f.settlements = append(f.settlements, SettlementAt{*s, e.Author, e.Time})
		}
	case ledger.TypeProbe:
		if p, err := ledger.DecodePayload[ledger.Probe](e.Payload); err == nil && p.Provider != "" && p.Provider != e.Author {
			f.probes = append(f.probes, probeAt{*p, e.Author, e.Time})
		}
	}
}
