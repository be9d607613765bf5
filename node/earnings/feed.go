package earnings

import (
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// OwnFeed is what a node's own feed says about money.
type OwnFeed struct {
	Self        string                     // this node's peer ID, the feed's author
	Leases      map[string]*auction.Lease  // lease CID -> lease
	LeaseOrder  []string                   // each lease CID once, in the order first journaled
	Settlements []SettledAt                // proven; one per lease, its last, where the first was
	settledAt   map[string]int             // lease CID -> its index in Settlements
	Vouchers    map[string]auction.Credits // lease CID -> the outcome's voucher total
}

// SettledAt is a settlement and when it was journaled (unix seconds).
type SettledAt struct {
	S    ledger.Settlement
	Time int64
}

// NewOwnFeed is an empty feed of self's, to Add its entries to.
func NewOwnFeed(self string) OwnFeed {
	return OwnFeed{Self: self, Leases: map[string]*auction.Lease{}, settledAt: map[string]int{}, Vouchers: map[string]auction.Credits{}}
}

// Add reads one entry of the feed, in feed order. A lease journaled again
// (the provider at the award, the renter at the start) is one lease; a
// lease settled again counts its last settlement only, as the reputation
// pass does.
func (f *OwnFeed) Add(e *ledger.Entry) {
	switch e.Type {
	case ledger.TypeLease:
		if l, sl, err := auction.DecodeLeaseUnverified(e.Payload); err == nil {
			cid := sl.CID().String()
			if f.Leases[cid] == nil {
				f.LeaseOrder = append(f.LeaseOrder, cid)
			}
			f.Leases[cid] = l
		}
	case ledger.TypeSettlement:
		s, err := ledger.DecodePayload[ledger.Settlement](e.Payload)
		if err != nil || s.Lease == "" || !s.Proven(f.Self) { // only what every other node counts too
			return
		}
		st := SettledAt{S: *s, Time: e.Time}
		if i, ok := f.settledAt[s.Lease]; ok {
			f.Settlements[i] = st // settled again: the last one stands
			return
		}
		f.settledAt[s.Lease] = len(f.Settlements)
		f.Settlements = append(f.Settlements, st)
	case ledger.TypeOutcome:
		if o, err := ledger.DecodePayload[ledger.Outcome](e.Payload); err == nil && len(o.Voucher) > 0 {
			if v, _, err := ledger.DecodeSignedVoucher(o.Voucher); err == nil {
				f.Vouchers[o.Lease] = v.Total
			}
		}
	}
}
