package node

import (
	"maps"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/earnings"
	"github.com/gleaner-net/gleaner/node/renting"
)

// spentLeases reads every lease this node rented: those in its own feed
// f and the current one of each job record (journaled a moment later than
// the record). The provider's settlement comes through replication and
// the reputation pass, seconds late; until it is there the job record's
// charge, reported in the exit event before `job run` returns, stands in
// for it: the same figure, so the balance never dips in between. f is
// read, not changed: the balance passes the same feed to its earnings.
func (n *Node) spentLeases(f earnings.OwnFeed) ([]earnings.SpentOn, map[string]renting.JobRecord) {
	self := f.Self
	leases, order := maps.Clone(f.Leases), slices.Clone(f.LeaseOrder)
	jobs := map[string]renting.JobRecord{}
	if r := n.renterJobs; r != nil {
		for _, j := range r.Snapshot(nil) {
			jobs[j.ID] = j
		}
	}
	for _, j := range jobs {
		if j.LeaseCID == "" || leases[j.LeaseCID] != nil {
			continue
		}
		if l, _, err := auction.DecodeLeaseUnverified(j.Lease); err == nil {
			leases[j.LeaseCID] = l
			order = append(order, j.LeaseCID)
		}
	}
	settled := map[string]earnings.SpentOn{}
	if n.rep != nil {
		for _, st := range n.rep.Settlements() {
			if st.Settlement.Renter == self {
				settled[st.Settlement.Lease] = earnings.SpentOn{Amount: st.Settlement.Paid(), Source: earnings.SpendSettlement, At: time.Unix(st.Time, 0)}
			}
		}
	}
	var out []earnings.SpentOn
	for _, cid := range order {
		l := leases[cid]
		if l.Renter != self {
			continue
		}
		s, ok := settled[cid]
		j, known := jobs[l.JobID]
		switch {
		case ok:
		case known && j.BilledLease == cid && j.Charged != nil && !j.ChargeDisputed:
			s = earnings.SpentOn{Amount: *j.Charged, Source: earnings.SpendReported, At: endOf(j)}
		case known && j.LeaseCID == cid:
			s = earnings.SpentOn{Amount: j.Paid, Source: earnings.SpendVouchers, At: endOf(j)}
		default:
			s = earnings.SpentOn{Amount: f.Vouchers[cid], Source: earnings.SpendVouchers, At: time.Unix(l.Start, 0)}
		}
		s.Lease, s.L = cid, l
		out = append(out, s)
	}
	return out, jobs
}

func endOf(j renting.JobRecord) time.Time {
	if j.EndedAt != nil {
		return *j.EndedAt
	}
	if j.StartedAt != nil {
		return *j.StartedAt
	}
	return j.Updated
}

func (n *Node) spend(from, to time.Time) (earnings.SpendResult, error) {
	f, err := n.readOwnFeed()
	if err != nil {
		return earnings.Spend(nil, nil, from, to), err
	}
	leases, jobs := n.spentLeases(f)
	return earnings.Spend(leases, func(id string) string { return jobs[id].Name }, from, to), nil
}
