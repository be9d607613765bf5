package node

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Spend sources, best first (SpendLease.Source).
const (
	spendSettlement = "settlement"      // the provider's, replicated to this node
	spendReported   = "reported charge" // the provider's charge at the job's end, within this node's bound
	spendVouchers   = "vouchers"        // what this node signed: the most the provider can take
)

// spentOn is what this node paid on one lease it rented, by the best
// record it holds, and the UTC day of that record.
type spentOn struct {
	lease  string
	l      *auction.Lease
	amount auction.Credits
	source string
	at     time.Time
}

// spentLeases reads every lease this node rented: those in its own feed
// f and the current one of each job record (journaled a moment later than
// the record). The provider's settlement comes through replication and
// the reputation pass, seconds late; until it is there the job record's
// charge, reported in the exit event before `job run` returns, stands in
// for it: the same figure, so the balance never dips in between. f is
// read, not changed: the balance passes the same feed to its earnings.
func (n *Node) spentLeases(f ownFeed) ([]spentOn, map[string]JobRecord) {
	self := f.self
	leases, order := maps.Clone(f.leases), slices.Clone(f.leaseOrder)
	jobs := map[string]JobRecord{}
	if r := n.renterJobs; r != nil {
		r.mu.Lock()
		for id, j := range r.jobs {
			jobs[id] = *j
		}
		r.mu.Unlock()
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
	settled := map[string]spentOn{}
	if n.rep != nil {
		for _, st := range n.rep.settlements() {
			if st.Settlement.Renter == self {
				settled[st.Settlement.Lease] = spentOn{amount: st.Settlement.Paid(), source: spendSettlement, at: time.Unix(st.Time, 0)}
			}
		}
	}
	var out []spentOn
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
			s = spentOn{amount: *j.Charged, source: spendReported, at: endOf(j)}
		case known && j.LeaseCID == cid:
			s = spentOn{amount: j.Paid, source: spendVouchers, at: endOf(j)}
		default:
			s = spentOn{amount: f.vouchers[cid], source: spendVouchers, at: time.Unix(l.Start, 0)}
		}
		s.lease, s.l = cid, l
		out = append(out, s)
	}
	return out, jobs
}

func endOf(j JobRecord) time.Time {
	if j.EndedAt != nil {
		return *j.EndedAt
	}
	if j.StartedAt != nil {
		return *j.StartedAt
	}
	return j.Updated
}

func (n *Node) spend(from, to time.Time) (SpendResult, error) {
	res := SpendResult{From: from, To: to.UTC(), ByName: []SpendName{}, Days: []SpendDay{}, Leases: []SpendLease{}}
	f, err := n.readOwnFeed()
	if err != nil {
		return res, err
	}
	leases, jobs := n.spentLeases(f)
	names := map[string]*SpendName{}
	jobsOf := map[string]map[string]bool{}
	days := map[string]auction.Credits{}
	for d := from; d.Before(to) && to.Sub(from) <= maxPeriod; d = d.AddDate(0, 0, 1) { // every day of the period, those without a job too
		days[d.Format(dayLayout)] = 0
	}
	for _, s := range leases {
		if s.at.Before(from) {
			continue
		}
		name := jobs[s.l.JobID].Name
		if name == "" {
			name = "(job " + s.l.JobID + ")" // its record is gone; the lease remains
		}
		day := s.at.UTC().Format(dayLayout)
		res.Leases = append(res.Leases, SpendLease{Day: day, Name: name, JobID: s.l.JobID, Lease: s.lease, Provider: s.l.Provider, Spent: s.amount, Source: s.source})
		res.Spent += s.amount
		days[day] += s.amount
		if names[name] == nil {
			names[name], jobsOf[name] = &SpendName{Name: name}, map[string]bool{}
		}
		nm := names[name]
		nm.Leases++
		nm.Spent += s.amount
		jobsOf[name][s.l.JobID] = true
		nm.Jobs = len(jobsOf[name])
	}
	for _, nm := range names {
		res.ByName = append(res.ByName, *nm)
	}
	sort.Slice(res.ByName, func(i, k int) bool { return res.ByName[i].Name < res.ByName[k].Name })
	for d, c := range days {
		res.Days = append(res.Days, SpendDay{Day: d, Spent: c})
	}
	sort.Slice(res.Days, func(i, k int) bool { return res.Days[i].Day < res.Days[k].Day })
	sort.SliceStable(res.Leases, func(i, k int) bool { return res.Leases[i].Day < res.Leases[k].Day })
	return res, nil
}
