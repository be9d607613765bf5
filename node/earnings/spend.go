package earnings

import (
	"sort"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Spend sources, best first (SpendLease.Source).
const (
	SpendSettlement = "settlement"      // the provider's, replicated to this node
	SpendReported   = "reported charge" // the provider's charge at the job's end, within this node's bound
	SpendVouchers   = "vouchers"        // what this node signed: the most the provider can take
)

// SpentOn is what this node paid on one lease it rented, by the best
// record it holds, and the UTC day of that record.
type SpentOn struct {
	Lease  string
	L      *auction.Lease
	Amount auction.Credits
	Source string
	At     time.Time
}

// Spend sums leases, the renter's spend by its best record for each, over
// [from, to): per job name (nameOf names a job ID; "" when its record is
// gone), per UTC day and per lease.
func Spend(leases []SpentOn, nameOf func(jobID string) string, from, to time.Time) SpendResult {
	res := SpendResult{From: from, To: to.UTC(), ByName: []SpendName{}, Days: []SpendDay{}, Leases: []SpendLease{}}
	names := map[string]*SpendName{}
	jobsOf := map[string]map[string]bool{}
	days := map[string]auction.Credits{}
	for d := from; d.Before(to) && to.Sub(from) <= MaxPeriod; d = d.AddDate(0, 0, 1) { // every day of the period, those without a job too
		days[d.Format(DayLayout)] = 0
	}
	for _, s := range leases {
		if s.At.Before(from) {
			continue
		}
		name := JobName(nameOf(s.L.JobID), s.L.JobID)
		day := s.At.UTC().Format(DayLayout)
		res.Leases = append(res.Leases, SpendLease{Day: day, Name: name, JobID: s.L.JobID, Lease: s.Lease, Provider: s.L.Provider, Spent: s.Amount, Source: s.Source})
		res.Spent += s.Amount
		days[day] += s.Amount
		if names[name] == nil {
			names[name], jobsOf[name] = &SpendName{Name: name}, map[string]bool{}
		}
		nm := names[name]
		nm.Leases++
		nm.Spent += s.Amount
		jobsOf[name][s.L.JobID] = true
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
	return res
}

// JobName is the name a report lists a lease under: its job's name, or,
// once the job's record is gone and the lease remains, "(job ID)".
func JobName(name, jobID string) string {
	if name == "" {
		return "(job " + jobID + ")"
	}
	return name
}
