package providing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/wire"
)

// The provider's guard: it runs only what it agreed to. A lease must
// repeat the provider's bid in every field the bid fixes, an award that is
// not started soon expires and frees its GPUs, a lease starts once, and
// the spec that starts is the one quoted, checked against the owner's
// policy again.

// RecordState is a lease's state as the provider persists it
// (Record.State). A lease's lifecycle has one owner, the scheduler
// (auction/provider.State); the states they share are its, by value, and
// a record is written from the scheduler's state as it changes, never
// kept beside it in memory. Two more are facts only this adapter knows:
// LeaseLaunched, written before a container exists, and
// LeaseInterrupted, a lease of the last run that cannot go on. Every
// change is written before it takes effect, and writing a state twice is
// harmless. On disk it is the same string older versions wrote, so that a
// record of theirs reads as it did (ReadRecord), and one of ours reads in
// theirs.
type RecordState string

// The lease states a record holds.
const (
	LeaseAwarded = RecordState(sched.Awarded) // co-signed, GPUs held, not started yet
	LeaseStarted = RecordState(sched.Started) // the renter started it; it cannot start again
	LeaseEnded   = RecordState(sched.Ended)   // settled and released
	LeaseExpired = RecordState(sched.Expired) // never started within the start deadline
	// LeaseLaunched: the job's container is being created or runs. From
	// here a restart of the provider adopts the container if it still
	// runs, and ends the lease if not; before it, a restart keeps the
	// lease, to be started again (see Restore).
	LeaseLaunched RecordState = "launched"
	// LeaseInterrupted: the provider crashed while the lease's job ran and
	// could not adopt its container at the next start (it exited or went
	// meanwhile, or the lease ended), or could not hold the lease again
	// after a restart; the lease is settled and can neither start nor run
	// again.
	LeaseInterrupted RecordState = "interrupted"
)

// endedRecord is the record of a lease the scheduler ended in st: expired
// (never started, or displaced as a newcomer's award) or ended.
func endedRecord(st sched.State) RecordState {
	if st == sched.Expired {
		return LeaseExpired
	}
	return LeaseEnded
}

// Store keeps the provider's lease records by job ID, as JSON: node's
// bbolt bucket of leases.
type Store interface {
	// ForEach calls fn with every job ID and raw record.
	ForEach(fn func(jobID string, raw []byte) error) error
	// Get decodes jobID's record into v, in a read-only transaction; an
	// error if there is none.
	Get(jobID string, v any) error
	// Update runs fn in one read-write transaction.
	Update(fn func(tx Tx) error) error
}

// Tx is one read-write transaction over the lease records.
type Tx interface {
	Get(jobID string, v any) error
	Put(jobID string, v any) error
}

// Record is a lease as the provider keeps it.
type Record struct {
	Lease   []byte      `json:"lease"` // co-signed SignedLease
	State   RecordState `json:"state"`
	Updated time.Time   `json:"updated"`
	// Voucher is the best voucher the renter signed for the lease's run
	// so far (wire bytes), kept as it arrives: a provider that crashed
	// while the job ran settles the run it adopts, or the one that ended
	// while it was down, by it (see Restore).
	Voucher []byte `json:"voucher,omitempty"`
	// Final is the last event the lease's run sent its renter (its exit,
	// with the code, the charge and the outputs' CID, or its error),
	// kept once the run has ended: a renter that lost the provider while
	// the job ran and attaches again after its end is answered with it
	// (lateAttach), and does not take the lease's absence for the
	// provider's failure. Absent from records of older versions, and of
	// leases whose job never ran.
	Final *wire.Event `json:"final,omitempty"`
	// Gang is a gang member's place in its gang's network, kept once its
	// start joined it (gang_start.go): a provider that crashed while the
	// member ran joins the gang's network again when it adopts the
	// container (rejoinGang), so that the other members reach it again.
	// Absent for other jobs and from records of older versions.
	Gang *GangPlace `json:"gang,omitempty"`
}

// GangPlace is what a provider needs to join a member's gang network
// again: the roster the renter sent with the start, as checked then, and
// the member's rank.
type GangPlace struct {
	Roster []byte `json:"roster"`
	Rank   int    `json:"rank"`
}

// ReadRecord reads a stored record, in either form older versions wrote:
// a record whose state is the string this version writes too, or, from
// before states were kept, the bare lease bytes, which count as ended.
func ReadRecord(raw []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(raw, &rec); err == nil {
		return rec, nil
	}
	var bare []byte
	if err := json.Unmarshal(raw, &bare); err != nil {
		return Record{}, err
	}
	return Record{Lease: bare, State: LeaseEnded}, nil
}

// errCrashed: the provider is playing dead (SimulateCrash) and writes
// nothing.
var errCrashed = errors.New("the provider has crashed (simulated)")

// saveLease records the lease's state; the voucher and the final event
// kept for the same lease stay.
func (pj *Provider) saveLease(jobID string, raw []byte, state RecordState) error {
	return pj.saveRecord(jobID, raw, state, nil)
}

// saveEnded records the lease ended by a run whose last event to the
// renter is final.
func (pj *Provider) saveEnded(jobID string, raw []byte, final wire.Event) error {
	return pj.saveRecord(jobID, raw, LeaseEnded, &final)
}

func (pj *Provider) saveRecord(jobID string, raw []byte, state RecordState, final *wire.Event) error {
	return pj.saveRecords([]savedLease{{jobID, raw}}, state, final)
}

// savedLease is one lease record to write: its job and co-signed lease.
type savedLease struct {
	jobID string
	raw   []byte
}

// saveLeases records the leases' state in one transaction (one fsync:
// the awards of a group commit, awardbatch.go).
func (pj *Provider) saveLeases(ls []savedLease, state RecordState) error {
	return pj.saveRecords(ls, state, nil)
}

func (pj *Provider) saveRecords(ls []savedLease, state RecordState, final *wire.Event) error {
	if pj.crashed() {
		return errCrashed
	}
	from := make([]RecordState, len(ls))
	err := pj.store.Update(func(tx Tx) error {
		for i, l := range ls {
			rec := Record{Lease: l.raw, State: state, Updated: time.Now().UTC(), Final: final}
			from[i] = ""
			var old Record
			if tx.Get(l.jobID, &old) == nil && bytes.Equal(old.Lease, l.raw) {
				rec.Voucher, rec.Gang, from[i] = old.Voucher, old.Gang, old.State
				if rec.Final == nil {
					rec.Final = old.Final
				}
			}
			if err := tx.Put(l.jobID, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, l := range ls {
		if from[i] != state {
			// One line per transition in the daemon's log (a state
			// written again is not one).
			pj.log.Info("lease state", "job", l.jobID, "from", from[i], "to", state)
		}
	}
	return nil
}

// saveVoucher keeps v, the best voucher so far of the lease raw's run,
// in its record while the lease is launched.
func (pj *Provider) saveVoucher(jobID string, raw, v []byte) error {
	if pj.crashed() {
		return errCrashed
	}
	return pj.store.Update(func(tx Tx) error {
		var rec Record
		if err := tx.Get(jobID, &rec); err != nil {
			return err
		}
		if !bytes.Equal(rec.Lease, raw) || rec.State != LeaseLaunched {
			return nil // another lease of this job ID's, or it ended
		}
		rec.Voucher = v
		return tx.Put(jobID, rec)
	})
}

// LeaseState is the persisted state of jobID's lease; false if there is
// no readable record of it.
func (pj *Provider) LeaseState(jobID string) (RecordState, bool) {
	var raw json.RawMessage // as stored: ReadRecord reads the older form too
	if pj.store.Get(jobID, &raw) != nil {
		return "", false
	}
	rec, err := ReadRecord(raw)
	if err != nil {
		return "", false
	}
	return rec.State, true
}

// finalOf is the last event of the ended run of the lease lease (wire
// bytes) of jobID, as its record keeps it; false if the record is of
// another lease, not ended, or keeps none (an older version's, or a run
// that never began).
func (pj *Provider) finalOf(jobID string, lease []byte) (wire.Event, bool) {
	var raw json.RawMessage // as stored: ReadRecord reads the older form too
	if pj.store.Get(jobID, &raw) != nil {
		return wire.Event{}, false
	}
	rec, err := ReadRecord(raw)
	if err != nil || rec.State != LeaseEnded || rec.Final == nil {
		return wire.Event{}, false
	}
	if cid := wire.LeaseCID(rec.Lease); cid == "" || cid != wire.LeaseCID(lease) {
		return wire.Event{}, false
	}
	return *rec.Final, true
}

// The refusals of a start. The renter reads their codes (errorEvent);
// renters that predate codes read these words (wire.LegacyCode).
var (
	errNoLease        = errors.New("no active lease for this job")
	errSuperseded     = errors.New("no active lease for this job: this lease was superseded by another")
	errStartedAlready = errors.New("this lease has started already; attach to follow its job")
	errAwardExpired   = errors.New("this award expired: it was not started in time")
)

// mayStart refuses, before a start's body is read, the starts that
// checkStart would refuse whatever the body held: a lease superseded,
// started already, expired or gone. The renter of a lease may then send
// its large body once, not again on every stream it opens.
func (pj *Provider) mayStart(al *activeLease) error {
	info, ok := pj.sched.Lease(al.lease.JobID, time.Now())
	switch {
	case ok && (!info.IsLease(al.lease) || info.Superseding):
		return errSuperseded
	case !ok:
		return errNoLease
	case info.Reason == sched.ReasonDisplaced:
		return sched.ErrDisplaced
	case info.State == sched.Started:
		return errStartedAlready
	case info.State == sched.Expired || !time.Now().Before(info.Deadline):
		return errAwardExpired
	}
	return nil
}

// checkStart admits the spec of a start request for al: it must be the
// spec the lease names by hash, and the owner's policy as it is now must
// still allow it. It marks the lease started, once: a second start, even
// of the same spec, is refused, since it would run a second container on
// the same GPUs.
func (pj *Provider) checkStart(al *activeLease, specYAML []byte) (*auction.JobSpec, error) {
	spec, err := auction.ParseJobSpec(specYAML)
	if err != nil {
		return nil, fmt.Errorf("bad job spec: %w", err)
	}
	hash, err := auction.SpecHash(spec)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(hash, al.lease.SpecHash) {
		return nil, errors.New("this is not the job spec the lease names: a provider runs only what it quoted")
	}
	offer := pj.p.Current()
	if why := auction.StartAllowed(spec, offer); why != "" {
		return nil, fmt.Errorf("the owner's policy no longer allows this job: %s", why)
	}
	// Once: a second start, one after the start deadline, or one of an
	// award its renter's new award replaces (supersede) is refused by the
	// scheduler, which decides it atomically; the start is recorded after,
	// outside any lock.
	acts, err := pj.sched.StartLease(al.lease, time.Now())
	switch {
	case errors.Is(err, sched.ErrSuperseded):
		return nil, errSuperseded
	case errors.Is(err, sched.ErrStarted):
		return nil, errStartedAlready
	case errors.Is(err, sched.ErrExpired):
		return nil, errAwardExpired
	case err != nil:
		return nil, err
	}
	if err := pj.saveLease(al.lease.JobID, al.raw, LeaseStarted); err != nil {
		return nil, fmt.Errorf("cannot record the start: %w", err)
	}
	pj.do(acts)
	return spec, nil
}
