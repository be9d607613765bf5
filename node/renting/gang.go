package renting

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
)

// A gang (the spec's gang:) is one record here, in store.BucketGangs, and
// a job per member and placement in BucketJobs, whose record names the
// gang and the member's rank. What to award, start, release or stop is
// decided by renter.Gang, without I/O; a driver goroutine per gang
// (driveGang) feeds it what came of its actions (the members' goroutines,
// gang_member.go, send it) and carries out what it decides. The gang's
// snapshot is saved before its actions are carried out, and a member
// job's ID is derived from the gang's, so a node that stopped between the
// two awards the same job again.
//
// A member's job is not an ordinary job: its lease is won by one round,
// held unstarted until the gang says go, and its run's end is the gang's
// to act on, never re-auctioned on its own.

// GangRecord is the renter's durable view of one gang.
type GangRecord struct {
	ID      string              `json:"id"`
	Name    string              `json:"name"`
	Spec    string              `json:"spec"`
	Created time.Time           `json:"created"`
	Updated time.Time           `json:"updated"`
	EndedAt *time.Time          `json:"ended_at,omitempty"`
	Members int                 `json:"members"`
	Secrets bool                `json:"secrets,omitempty"` // submitted with secrets or registry credentials, kept in memory only
	Life    renter.GangSnapshot `json:"gang"`
}

// gangRun is one gang's driver state.
type gangRun struct {
	mu      sync.Mutex // guards g, rec and members: one step at a time
	g       *renter.Gang
	rec     GangRecord
	spec    *auction.JobSpec
	secrets map[string]string
	auth    *wire.RegistryAuth
	events  chan renter.GangEvent    // from the members' goroutines
	members map[string]*memberSignal // by member job: its go or release, while it waits for one
}

// memberSignal is how the driver tells a member holding an award to
// start it, and a member (started or not) to let its lease go. Each is
// sent at most once; a release may follow a start.
type memberSignal struct {
	start, release         chan struct{}
	startOnce, releaseOnce sync.Once
	// roster is the gang's roster (gangnet.Roster as JSON) sent with the
	// start; written before start is closed, read after.
	roster []byte
}

func (m *memberSignal) goAhead() { m.startOnce.Do(func() { close(m.start) }) }

// goAheadWith starts the member with the gang's roster.
func (m *memberSignal) goAheadWith(roster []byte) {
	m.startOnce.Do(func() { m.roster = roster; close(m.start) })
}
func (m *memberSignal) letGo() { m.releaseOnce.Do(func() { close(m.release) }) }

// submitGang checks that the book can hold the gang, records it and
// starts its driver, which awards its first member.
func (r *Jobs) submitGang(spec *auction.JobSpec, specYAML []byte, secrets map[string]string, opt SubmitOptions) (*JobRecord, error) {
	if opt.Canary || opt.Service != "" || opt.Provider != "" {
		return nil, fmt.Errorf("%w: gang: a gang runs on gang.members distinct providers; it cannot be pinned to one, a canary or a service replica", auction.ErrBadJobSpec)
	}
	if r.m == nil || r.auc == nil {
		return nil, fmt.Errorf("gang: this node has no market to place a gang in")
	}
	env := auction.Env{Now: time.Now(), RTT: r.rtt, Reputation: r.rep}
	if err := renter.GangFits(spec, r.m.Book().Snapshot(), env); err != nil {
		return nil, err // before anything is quoted or bought
	}
	id := spec.Name + "-" + hex.EncodeToString(randomNonce()[:6])
	now := time.Now().UTC()
	g := renter.NewGang(id, spec.Gang.Members, spec.Retry.MaxReauctions)
	g.AwardTogether() // one round's time to place, not one per member (gangShares)
	run := &gangRun{g: g, spec: spec, secrets: secrets, auth: opt.RegistryAuth, events: make(chan renter.GangEvent, 4*renter.MaxGangPlacements*auction.MaxGangMembers),
		members: map[string]*memberSignal{},
		rec: GangRecord{ID: id, Name: spec.Name, Spec: string(specYAML), Created: now, Updated: now, Members: spec.Gang.Members,
			Secrets: len(secrets) > 0 || opt.RegistryAuth != nil, Life: g.Snapshot()}}
	if err := r.saveGang(&run.rec); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.gangs[id] = run
	r.mu.Unlock()
	if !r.spawn(func() { r.driveGang(run, run.g.Begin) }) {
		return nil, errStopping
	}
	return r.Get(id)
}

func (r *Jobs) saveGang(g *GangRecord) error {
	return r.store.Update(func(tx *store.Tx) error { return tx.Put(store.BucketGangs, g.ID, g) })
}

// loadGangs reads the gangs of the last run; resumeGangs drives those
// that had not ended.
func (r *Jobs) loadGangs() error {
	return r.store.ForEach(store.BucketGangs, func(key string, raw []byte) error {
		var rec GangRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return err
		}
		spec, err := auction.ParseJobSpec([]byte(rec.Spec))
		if err != nil {
			return fmt.Errorf("gang %s: %w", rec.ID, err)
		}
		r.gangs[rec.ID] = &gangRun{g: renter.RestoreGang(rec.Life), rec: rec, spec: spec,
			events: make(chan renter.GangEvent, 4*renter.MaxGangPlacements*auction.MaxGangMembers), members: map[string]*memberSignal{}}
		return nil
	})
}

// resumeGangs drives again the gangs that had not ended
// (renter.Gang.Restarted): a running gang's members are followed again,
// their streams re-attached as any job's are (followMember); a gang
// being placed lets its awards go and is placed anew from its
// checkpoints, spending no re-auction. One submitted with secrets is
// ended: whatever would follow (a member lost, a new placement) needs
// them, and they were never stored.
func (r *Jobs) resumeGangs() {
	r.mu.Lock()
	var runs []*gangRun
	for _, run := range r.gangs {
		runs = append(runs, run)
	}
	r.mu.Unlock()
	for _, run := range runs {
		if run.g.Ended() {
			continue
		}
		if run.rec.Secrets {
			run.mu.Lock()
			acts := run.g.Cancel()
			run.mu.Unlock()
			r.gangActs(run, acts)
			r.gangEnded(run, "this node restarted; the gang's secrets were never stored: resubmit it")
			continue
		}
		r.spawn(func() { r.driveGang(run, run.g.Restarted) })
	}
}

// driveGang carries out first's actions, then steps the gang with every
// event its members send until it ends or this node stops.
func (r *Jobs) driveGang(run *gangRun, first func() []renter.GangAction) {
	run.mu.Lock()
	acts := first()
	run.mu.Unlock()
	r.gangActs(run, acts)
	for {
		if r.gangOver(run) {
			return
		}
		select {
		case <-r.bg.Done():
			return
		case ev := <-run.events:
			run.mu.Lock()
			acts := run.g.Step(ev)
			run.mu.Unlock()
			r.gangActs(run, acts)
		}
	}
}

// gangOver reports whether run's gang has ended and none of its members
// still holds anything (their ends are still fed to it until then, so
// that each stop is seen through); it records the end once.
func (r *Jobs) gangOver(run *gangRun) bool {
	run.mu.Lock()
	ended, snap := run.g.Ended(), run.g.Snapshot()
	recorded := run.rec.EndedAt != nil
	run.mu.Unlock()
	if !ended {
		return false
	}
	if !recorded {
		r.gangEnded(run, snap.Reason)
	}
	for _, m := range snap.Members {
		if m.Phase == renter.MemberStopping || m.Phase == renter.MemberAwarding {
			return false
		}
	}
	return true
}

// gangActs saves the gang's snapshot, then carries out acts.
func (r *Jobs) gangActs(run *gangRun, acts []renter.GangAction) {
	run.mu.Lock()
	run.rec.Life, run.rec.Updated = run.g.Snapshot(), time.Now().UTC()
	err := r.saveGang(&run.rec)
	run.mu.Unlock()
	if err != nil {
		r.log.Error("gang record not saved", "gang", run.rec.ID, "err", err)
	}
	var roster []byte // built at the first start: every member holds an award then
	var shares [][]string
	for _, a := range acts {
		switch a.Kind {
		case renter.GangAward:
			var only map[string]bool
			if a.Batch > 0 {
				if a.Share == 0 || shares == nil {
					shares = r.gangShares(run, a)
				}
				if only = toSet(shares[a.Share]); len(only) == 0 {
					// Fewer providers can run a member now than there
					// are rounds: this one is awarded alone after them.
					r.gangEvent(run, renter.GangEvent{Kind: renter.GangAwardFailed, Rank: a.Rank, Job: a.Job, Why: "no provider left in its share of the book"})
					continue
				}
			}
			if err := r.awardMember(run, a, only); err != nil {
				r.log.Error("gang member not placed", "gang", run.rec.ID, "rank", a.Rank, "err", err)
				r.gangEvent(run, renter.GangEvent{Kind: renter.GangAwardFailed, Rank: a.Rank, Job: a.Job, Why: err.Error()})
			}
		case renter.GangStart:
			if roster == nil {
				roster = r.gangRoster(run)
			}
			r.signalMember(run, a.Job, func(m *memberSignal) { m.goAheadWith(roster) })
		case renter.GangFollow:
			// Registered before the spawn, so that a stop decided
			// meanwhile finds the member's signal.
			sig := &memberSignal{start: make(chan struct{}), release: make(chan struct{})}
			sig.goAhead()
			run.mu.Lock()
			run.members[a.Job] = sig
			run.mu.Unlock()
			r.spawn(func() { r.followMember(run, a, sig) })
		case renter.GangRelease, renter.GangStop:
			if !r.signalMember(run, a.Job, (*memberSignal).letGo) {
				// No goroutine holds it (this node restarted): tell
				// its provider here, and the gang that it ended.
				r.spawn(func() { r.stopOrphanMember(run, a) })
			}
		}
	}
	if len(acts) > 0 {
		r.publish(JobEvent{JobID: run.rec.ID, Type: "state", State: run.rec.Life.State, Time: time.Now().UTC()})
	}
}

// signalMember does f to job's signal; false when no goroutine waits on
// one.
func (r *Jobs) signalMember(run *gangRun, job string, f func(*memberSignal)) bool {
	run.mu.Lock()
	m := run.members[job]
	run.mu.Unlock()
	if m == nil {
		return false
	}
	f(m)
	return true
}

// gangEvent hands ev to run's driver; it never blocks past this node's
// stop.
func (r *Jobs) gangEvent(run *gangRun, ev renter.GangEvent) {
	select {
	case run.events <- ev:
	case <-r.bg.Done():
	}
}

// gangEnded records the gang's end.
func (r *Jobs) gangEnded(run *gangRun, why string) {
	run.mu.Lock()
	now := time.Now().UTC()
	run.rec.Life, run.rec.Updated, run.rec.EndedAt = run.g.Snapshot(), now, &now
	if err := r.saveGang(&run.rec); err != nil {
		r.log.Error("gang record not saved", "gang", run.rec.ID, "err", err)
	}
	id, st := run.rec.ID, run.rec.Life.State
	run.mu.Unlock()
	// The members' checkpoints were kept for the next placement; there
	// is none now.
	for _, j := range r.Snapshot(func(j *JobRecord) bool { return j.Gang == id }) {
		if err := r.store.Update(func(tx *store.Tx) error { return tx.Delete(store.BucketCheckpoints, j.ID) }); err != nil {
			r.log.Error("gang member's checkpoint not deleted", "job", j.ID, "err", err)
		}
	}
	r.log.Info("gang ended", "gang", id, "state", st, "why", why)
	r.publish(JobEvent{JobID: id, Type: "state", State: st, Note: why, Time: now})
}

// cancelGang ends run's gang: awards released, running members stopped.
func (r *Jobs) cancelGang(run *gangRun) (*JobRecord, error) {
	run.mu.Lock()
	if run.g.Ended() {
		run.mu.Unlock()
		return r.Get(run.rec.ID)
	}
	acts := run.g.Cancel()
	run.mu.Unlock()
	r.gangActs(run, acts)
	r.gangOver(run) // records the end now, not at the driver's next event
	return r.Get(run.rec.ID)
}

func (r *Jobs) gangOf(id string) *gangRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gangs[id]
}

// stopOrphanMember tells a member's provider to let its lease go, after
// this node restarted (no goroutine follows it), and the gang that it
// ended.
func (r *Jobs) stopOrphanMember(run *gangRun, a renter.GangAction) {
	j, err := r.Get(a.Job)
	if err == nil && len(j.Lease) > 0 && !Terminal(j.State) {
		ctx, cancel := context.WithTimeout(r.bg, 30*time.Second)
		var ev wire.Event
		if err := r.Exchange(ctx, j.Provider, wire.JobProto, wire.JobHead{Kind: "cancel", Lease: j.Lease}, &ev); err != nil {
			r.log.Warn("gang member's provider not told to stop", "job", a.Job, "err", err)
		}
		cancel()
	}
	if err == nil && !Terminal(j.State) {
		r.update(a.Job, "stopped with its gang", func(j *JobRecord) { j.State = StateCancelled })
	}
	provider := ""
	if j != nil {
		provider = j.Provider
	}
	r.gangEvent(run, renter.GangEvent{Kind: renter.GangEnded, Rank: a.Rank, Job: a.Job, Provider: provider, End: renter.EndCancelled, Why: "stopped with its gang"})
}

// gangShares deals the book for a placement's parallel rounds (a's
// batch): disjoint shares, so that no two members' rounds ask, or win,
// one provider. The order of equal floors is drawn anew each time, so
// that renters placing gangs at once do not all begin with one provider.
func (r *Jobs) gangShares(run *gangRun, a renter.GangAction) [][]string {
	ms, err := run.spec.MemberSpec(run.rec.ID, a.Rank)
	if err != nil {
		return make([][]string, a.Batch) // every round then fails, and is tried alone
	}
	env := auction.Env{Now: time.Now(), RTT: r.rtt, Reputation: r.rep}
	return renter.GangShares(ms, r.m.Book().Snapshot(), env, a.Avoid, a.Batch, auction.TiebreakOf(randomNonce()))
}

func toSet(ps []string) map[string]bool {
	m := make(map[string]bool, len(ps))
	for _, p := range ps {
		m[p] = true
	}
	return m
}
