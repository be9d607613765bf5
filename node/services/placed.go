package services

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/renting"
)

// Placement: whether a service has a replica on a provider, why not, and
// service_up's wait for the first one (docs/SERVICES.md, "When no replica
// can be placed").
//
// A spec no provider can run (an image that does not exist, a workload no
// provider allows, a max_price below every bid, a GPU nobody sells) used
// to come up as a URL whose gateway answers 503 for ever, its replicas
// ending no-match and bought again in silence. Now the keeper records in
// the service why none is placed (ServiceRecord.NotPlaced, status's
// not_placed), and service_up with wait_s returns only once a replica is
// placed, or fails naming the cause.

// placedState reports whether a replica's job in state has a provider
// that runs it (or, gold, that holds its window): the service is placed.
func placedState(state string) bool {
	switch state {
	case renting.StateRunning, renting.StateReserved, renting.StatePreempting, renting.StatePaused:
		return true
	}
	return false
}

// endedUnplaced reports whether a replica's job ended without a provider
// ever running it: no provider took it (no-match), or those that took it
// could not start it (failed before it ran: an image none could pull).
func endedUnplaced(j *renting.JobRecord) bool {
	return j.State == renting.StateNoMatch || j.State == renting.StateFailed && j.StartedAt == nil
}

// replicaWhy says, for a person, how replica i's job j stands and why:
// its state, its error (which for a no-match names `job explain`), and
// for an auction that found no match the reasons the providers gave.
func replicaWhy(i int, j *renting.JobRecord) string {
	return "replica " + strconv.Itoa(i) + " (job " + j.ID + ") " + jobWhy(j)
}

// jobWhy is replicaWhy's account of job j, without the replica.
func jobWhy(j *renting.JobRecord) string {
	why := "is " + j.State
	switch {
	case renting.Terminal(j.State):
		why = "ended " + j.State
	case j.State == renting.StateAuction:
		why = "is still in auction"
	}
	if j.Error != "" {
		why += ": " + j.Error
	}
	if j.State == renting.StateNoMatch || j.State == renting.StateAuction {
		if r := offerReasons(j.Explain); r != "" {
			why += "; the providers' reasons: " + r
		}
	}
	return why
}

// offerReasons sums up why a job's last auction round leased nothing:
// each distinct reason an offer was rejected, a quote declined, a bid
// not admitted or an award refused, with how many providers gave it, the
// most common first; at most maxOfferReasons of them.
func offerReasons(ex *renter.Explain) string {
	if ex == nil {
		return ""
	}
	counts := map[string]int{}
	var order []string
	add := func(why string) {
		if why == "" {
			return
		}
		if counts[why] == 0 {
			order = append(order, why)
		}
		counts[why]++
	}
	for _, r := range ex.Rejected {
		add(r.Reason)
	}
	for _, q := range ex.Quotes {
		add(q.Declined)
		add(q.Error)
	}
	for _, r := range ex.NotAdmitted {
		add(r.Reason)
	}
	for _, a := range ex.Awards {
		add(a.Refused)
		add(a.Error)
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	var parts []string
	for i, why := range order {
		if i == maxOfferReasons {
			parts = append(parts, fmt.Sprintf("%d more", len(order)-i))
			break
		}
		n := counts[why]
		parts = append(parts, fmt.Sprintf("%s (%d provider%s)", why, n, plural(n)))
	}
	return strings.Join(parts, "; ")
}

const maxOfferReasons = 3

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// notPlacedView is status's not_placed for a service none of whose
// replicas is placed: the record's NotPlaced, else, while replicas are
// still being auctioned, the latest round's why for one that found no
// match so far ("" when none has: they are simply on their way).
func notPlacedView(rec *ServiceRecord, jobs []*renting.JobRecord) string {
	if rec.NotPlaced != "" {
		return rec.NotPlaced
	}
	var latest *renting.JobRecord
	at := -1
	for i, j := range jobs {
		if j == nil || j.Error == "" || j.State != renting.StateAuction && !endedUnplaced(j) {
			continue
		}
		if latest == nil || j.Updated.After(latest.Updated) {
			latest, at = j, i
		}
	}
	if latest == nil {
		return ""
	}
	return replicaWhy(at, latest)
}

// service_up's outcomes when it waits (ServiceUpOutcome.Result).
const (
	UpPlaced    = "placed"
	UpNotPlaced = "not_placed"
	UpTimedOut  = "timed_out"
)

// ServiceUpOutcome is what service_up's wait for a placed replica found.
type ServiceUpOutcome struct {
	Result string `json:"result" doc:"placed: a replica's job runs on a provider (a gold one: holds its window); not_placed: every replica attempt ended without a provider running it, and the service was taken down; timed_out: wait_s passed while replicas were still being placed, and the service was kept"`
	Cause  string `json:"cause,omitempty" doc:"why no replica was placed: the latest replica attempt's state and error, with the providers' reasons for a no-match"`
	Kept   bool   `json:"kept" doc:"whether the service is still up: its gateway listens and its replicas are bought and healed as ever"`
	Waited int64  `json:"waited_ms" doc:"how long service_up waited, in milliseconds"`
	// Ready: once placed, service_up waits on (within wait_s) for the
	// gateway to see a replica pass its readiness check, so that the URL
	// it returns answers at once rather than 503 while the model loads.
	Ready bool `json:"ready" doc:"placed and a replica passed its readiness check in the gateway: the URL serves now; false when wait_s ended first (the gateway answers 503 with Retry-After until a replica is ready)"`
}

// placePoll is how often service_up's wait looks at the replicas.
const placePoll = 200 * time.Millisecond

// awaitPlaced waits, for at most wait, until a replica of the service
// is placed (placed), or every replica attempt so far has ended without
// being placed, as the keeper records it, or healing stopped (not
// placed), and says which; after wait it is timed out. It returns an
// error only when ctx ends (the caller went away) or the service went
// down meanwhile. It changes nothing: the caller decides what is left.
func (s *Manager) awaitPlaced(ctx context.Context, name string, wait time.Duration) (*ServiceUpOutcome, error) {
	began := time.Now()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(placePoll)
	defer tick.Stop()
	out := func(result, cause string) *ServiceUpOutcome {
		return &ServiceUpOutcome{Result: result, Cause: cause, Kept: true, Waited: time.Since(began).Milliseconds()}
	}
	for {
		s.mu.Lock()
		rec := s.recs[name]
		var reps []string
		var notPlaced, heal string
		if rec != nil {
			reps, notPlaced, heal = slices.Clone(rec.Replicas), rec.NotPlaced, rec.HealError
		}
		s.mu.Unlock()
		if rec == nil {
			return nil, fmt.Errorf("service %q was taken down (`gleaner service down`) while service up waited for a replica", name)
		}
		for _, id := range reps {
			if j, err := s.jobs.Get(id); err == nil && placedState(j.State) {
				return out(UpPlaced, ""), nil
			}
		}
		if cause := cmp.Or(notPlaced, heal); cause != "" {
			return out(UpNotPlaced, cause), nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return out(UpTimedOut, s.stillPlacing(name)), nil
		case <-tick.C:
		}
	}
}

// awaitReady waits, for at most wait, until the service's gateway has a
// replica that passed its readiness check; false when wait (or ctx) ends
// first, or the service has no gateway.
func (s *Manager) awaitReady(ctx context.Context, name string, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		s.mu.Lock()
		ls := s.live[name]
		s.mu.Unlock()
		if ls == nil || ls.gw == nil {
			return false
		}
		for _, r := range ls.gw.Stats().Replicas {
			if r.Ready {
				return true
			}
		}
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(placePoll, time.Until(deadline))):
		}
	}
}

// stillPlacing says why no replica of the service is placed yet: status's
// not_placed, or each replica's state (an auction, an image pulling).
func (s *Manager) stillPlacing(name string) string {
	v, err := s.View(name, false)
	if err != nil {
		return err.Error()
	}
	if v.NotPlaced != "" {
		return v.NotPlaced
	}
	var parts []string
	for _, r := range v.Replicas {
		p := "replica " + strconv.Itoa(r.Index) + " (job " + r.Job + ") is " + cmp.Or(r.State, "gone")
		if r.Provider != "" {
			p += " on " + r.Provider
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// upAndWait is service_up with a wait (wait > 0): up, then awaitPlaced.
// A service none of whose replicas could be placed is taken down, its
// gateway closed and its jobs cancelled: a command that fails leaves
// nothing half-alive behind it (a gateway answering 503, a port held,
// auctions bought again for ever), and the same service up can be run
// again once the spec is fixed. One still being placed when the wait
// ends (an auction retrying, a large image pulling) is kept, and the
// error says so and how to remove it; so is one whose caller went away.
// The view returned carries the outcome in Up; err is an
// ErrServiceNotPlaced unless it is placed.
func (s *Manager) upAndWait(ctx context.Context, specYAML []byte, listen string, port int, wait time.Duration) (*ServiceView, error) {
	rec, _, err := s.up(specYAML, listen, port)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	out, err := s.awaitPlaced(ctx, rec.Name, wait)
	if err != nil {
		return nil, err
	}
	if out.Result == UpPlaced {
		out.Ready = s.awaitReady(ctx, rec.Name, wait-time.Since(began))
		out.Waited = time.Since(began).Milliseconds()
	}
	v, err := s.View(rec.Name, false)
	if err != nil {
		return nil, err
	}
	v.Up = out
	switch out.Result {
	case UpPlaced:
		return v, nil
	case UpNotPlaced:
		if err := s.takeDown(rec.Name); err != nil {
			out.Cause += "; and it could not be taken down: " + err.Error()
			return v, &ServiceNotPlacedError{View: v, msg: fmt.Sprintf("service %s could not be placed: %s", rec.Name, out.Cause)}
		}
		out.Kept = false
		v.URL, v.Gateway, v.Listen, v.LAN, v.Token, v.Curl = "", "down", "", nil, "", ""
		for i, r := range v.Replicas {
			if j, err := s.jobs.Get(r.Job); err == nil {
				v.Replicas[i].State = j.State
			}
		}
		return v, &ServiceNotPlacedError{View: v, msg: fmt.Sprintf("service %s could not be placed: %s; it was taken down (nothing runs, port %d is free again)", rec.Name, out.Cause, v.Port)}
	default:
		return v, &ServiceNotPlacedError{View: v, msg: fmt.Sprintf("no replica of service %s was placed within %v: %s; the service is kept and goes on placing its replicas: `gleaner service status %s` follows it, `gleaner service down %s` removes it",
			rec.Name, wait, out.Cause, rec.Name, rec.Name)}
	}
}

// ServiceNotPlacedError is service_up's wait ending without a placed
// replica; View (with Up) is the service as it stands, or stood before it
// was taken down.
type ServiceNotPlacedError struct {
	View *ServiceView
	msg  string
}

func (e *ServiceNotPlacedError) Error() string { return e.msg }

// takeDown removes a service that never had a replica placed, as down
// does, but cancels only its jobs that have not ended: the others never
// ran (no-match, or an image no provider could pull), so no provider
// holds anything of them to stop.
func (s *Manager) takeDown(name string) error {
	rec, err := s.forget(name)
	if rec == nil {
		return err
	}
	var live []string
	for _, id := range append(append(slices.Clone(rec.Replicas), successors(rec)...), rec.Retiring...) {
		if j, gerr := s.jobs.Get(id); gerr == nil && !renting.Terminal(j.State) {
			live = append(live, id)
		}
	}
	s.cancelJobs(live)
	return err
}
