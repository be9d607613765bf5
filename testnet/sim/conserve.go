package sim

import (
	"fmt"
	"slices"
)

// CheckConservation verifies that a strategy's outcomes could have
// happened on s: every run on a provider that serves its job, inside one
// of its windows and [0, horizon], its useful and lost GPU-seconds adding
// up to its length times its GPUs; each outcome's Done the sum of its
// runs' Useful and at most the job's work; and, at every instant, no
// provider running more GPUs than it has. The first violation found is
// returned, naming the strategy, job, provider and instant.
func CheckConservation(s *Supply, d *Demand, st Strategy, horizon int64) error {
	if len(st.Outcomes) != len(d.Jobs) {
		return fmt.Errorf("%s: %d outcomes for %d jobs", st.Name, len(st.Outcomes), len(d.Jobs))
	}
	perProv := make([]int, len(s.Providers)+1)
	for i, o := range st.Outcomes {
		if err := checkOutcome(s, d, st.Name, i, o, horizon); err != nil {
			return err
		}
		for _, r := range o.Runs {
			perProv[r.Provider+1] += 2
		}
	}
	// Bucket the run endpoints by provider (counting sort), then sweep
	// each provider's in time order.
	for p := range s.Providers {
		perProv[p+1] += perProv[p]
	}
	marks := make([]consMark, perProv[len(s.Providers)])
	fill := slices.Clone(perProv)
	for i, o := range st.Outcomes {
		for _, r := range o.Runs {
			marks[fill[r.Provider]] = consMark{at: r.Start, gpus: r.GPUs, job: i}
			marks[fill[r.Provider]+1] = consMark{at: r.End, gpus: -r.GPUs, job: i}
			fill[r.Provider] += 2
		}
	}
	for p := range s.Providers {
		if err := sweepProvider(s, d, st.Name, p, marks[perProv[p]:perProv[p+1]]); err != nil {
			return err
		}
	}
	return nil
}

// consMark is a run's start (+gpus) or end (-gpus) on a provider.
type consMark struct {
	at   int64
	gpus int
	job  int
}

// sweepProvider adds up GPUs in use on p through its run endpoints; at
// equal instants ends go first, since runs are half-open.
func sweepProvider(s *Supply, d *Demand, name string, p int, marks []consMark) error {
	slices.SortFunc(marks, func(a, b consMark) int {
		switch {
		case a.at != b.at:
			if a.at < b.at {
				return -1
			}
			return 1
		case a.gpus != b.gpus:
			return a.gpus - b.gpus
		}
		return a.job - b.job
	})
	pr := &s.Providers[p]
	use := 0
	for _, m := range marks {
		use += m.gpus
		if use > pr.GPUs {
			return fmt.Errorf("%s: job %s on provider %s at t=%d: %d GPUs in use, it has %d",
				name, d.Jobs[m.job].ID, pr.ID, m.at, use, pr.GPUs)
		}
	}
	return nil
}

// checkOutcome checks one job's runs on their own.
func checkOutcome(s *Supply, d *Demand, name string, i int, o Outcome, horizon int64) error {
	j := &d.Jobs[i]
	if o.Job != i {
		return fmt.Errorf("%s: outcome %d is for job index %d", name, i, o.Job)
	}
	var done int64
	for _, r := range o.Runs {
		if r.Provider < 0 || r.Provider >= len(s.Providers) {
			return fmt.Errorf("%s: job %s at t=%d: run on unknown provider %d", name, j.ID, r.Start, r.Provider)
		}
		p := &s.Providers[r.Provider]
		where := fmt.Sprintf("%s: job %s on provider %s at t=%d", name, j.ID, p.ID, r.Start)
		switch {
		case !ProviderServes(p, j):
			return fmt.Errorf("%s: provider does not serve the job (model, region, GPUs or floor)", where)
		case r.GPUs != j.GPUs:
			return fmt.Errorf("%s: run on %d GPUs, the job needs %d", where, r.GPUs, j.GPUs)
		case r.Start < 0 || r.End > horizon || r.End < r.Start:
			return fmt.Errorf("%s: run [%d, %d) outside [0, %d]", where, r.Start, r.End, horizon)
		case r.Start < j.Submit:
			return fmt.Errorf("%s: run starts before the job's submission at %d", where, j.Submit)
		case !insideWindow(p, r.Start, r.End):
			return fmt.Errorf("%s: run [%d, %d) not inside one window", where, r.Start, r.End)
		case r.Useful < 0 || r.Lost < 0 || r.Useful+r.Lost != (r.End-r.Start)*int64(r.GPUs):
			return fmt.Errorf("%s: useful %d + lost %d != %d s x %d GPUs", where, r.Useful, r.Lost, r.End-r.Start, r.GPUs)
		}
		done += r.Useful
	}
	work := j.Work()
	switch {
	case o.Done != done:
		return fmt.Errorf("%s: job %s: done %d != %d, the sum of its runs' useful GPU-seconds", name, j.ID, o.Done, done)
	case done > work:
		return fmt.Errorf("%s: job %s: done %d > its work %d", name, j.ID, done, work)
	case o.Completed != (done == work):
		return fmt.Errorf("%s: job %s: completed=%v with %d of %d GPU-seconds done", name, j.ID, o.Completed, done, work)
	}
	return nil
}

// insideWindow: [start, end) lies inside one of p's windows.
func insideWindow(p *Provider, start, end int64) bool {
	w, ok := windowAt(p, start)
	return ok && end <= w.End
}
