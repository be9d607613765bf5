package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
)

// The provider's guard: it runs only what it agreed to. A lease must
// repeat the provider's bid in every field the bid fixes, an award that is
// not started soon expires and frees its GPUs, a lease starts once, and
// the spec that starts is the one quoted, checked against the owner's
// policy again.

// Lease states as the provider persists them (bucketLeases). Every change
// is written before it takes effect, and writing a state twice is
// harmless.
const (
	leaseAwarded = string(sched.Awarded) // co-signed, GPUs held, not started yet
	leaseStarted = string(sched.Started) // the renter started it; it cannot start again
	leaseEnded   = string(sched.Ended)   // settled and released
	leaseExpired = string(sched.Expired) // never started within the start deadline
)

// DefaultStartDeadline is how long an award holds GPUs before its renter
// must start it (Options.StartDeadline): the scheduler's default. A
// renter starts at once after the award; a lease that is never started
// would otherwise hold the GPUs for free until the provider restarts.
const DefaultStartDeadline = sched.DefaultStartDeadline

// leaseRecord is a lease as the provider keeps it.
type leaseRecord struct {
	Lease   []byte    `json:"lease"` // co-signed SignedLease
	State   string    `json:"state"`
	Updated time.Time `json:"updated"`
}

// readLeaseRecord reads a stored record; records written before states
// were kept are the bare lease bytes, and count as ended.
func readLeaseRecord(raw []byte) (leaseRecord, error) {
	var rec leaseRecord
	if err := decodeJSON(raw, &rec); err == nil {
		return rec, nil
	}
	var bare []byte
	if err := decodeJSON(raw, &bare); err != nil {
		return leaseRecord{}, err
	}
	return leaseRecord{Lease: bare, State: leaseEnded}, nil
}

func (pj *providerJobs) saveLease(jobID string, raw []byte, state string) error {
	rec := leaseRecord{Lease: raw, State: state, Updated: time.Now().UTC()}
	return pj.p.store.Update(func(tx *StoreTx) error { return tx.Put(bucketLeases, jobID, rec) })
}

// checkStart admits the spec of a start request for al: it must be the
// spec the lease names by hash, and the owner's policy as it is now must
// still allow it. It marks the lease started, once: a second start, even
// of the same spec, is refused, since it would run a second container on
// the same GPUs.
func (pj *providerJobs) checkStart(al *activeLease, specYAML []byte) (*auction.JobSpec, error) {
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
	// Once: a second start, or one after the start deadline, is refused by
	// the scheduler, which decides it atomically.
	acts, err := pj.sched.Start(al.lease.JobID, time.Now())
	switch {
	case errors.Is(err, sched.ErrStarted):
		return nil, errors.New("this lease has started already; attach to follow its job")
	case errors.Is(err, sched.ErrExpired):
		return nil, errors.New("this award expired: it was not started in time")
	case err != nil:
		return nil, err
	}
	if err := pj.saveLease(al.lease.JobID, al.raw, leaseStarted); err != nil {
		return nil, fmt.Errorf("cannot record the start: %w", err)
	}
	pj.do(acts)
	return spec, nil
}

// leaseInterrupted: the provider stopped while it held the lease (its
// container went with it); the lease can neither start nor run again.
const leaseInterrupted = "interrupted"

// markInterrupted records, at start-up, that the leases an earlier run
// held are over: leases do not survive a provider's restart yet, so none
// of them may start or be shown as running.
func (pj *providerJobs) markInterrupted() error {
	var open []string
	err := pj.p.store.ForEach(bucketLeases, func(jobID string, raw []byte) error {
		if rec, err := readLeaseRecord(raw); err == nil && (rec.State == leaseAwarded || rec.State == leaseStarted) {
			open = append(open, jobID)
		}
		return nil
	})
	if err != nil || len(open) == 0 {
		return err
	}
	return pj.p.store.Update(func(tx *StoreTx) error {
		for _, id := range open {
			var raw json.RawMessage
			if err := tx.Get(bucketLeases, id, &raw); err != nil {
				return err
			}
			rec, err := readLeaseRecord(raw)
			if err != nil {
				return err
			}
			rec.State, rec.Updated = leaseInterrupted, time.Now().UTC()
			if err := tx.Put(bucketLeases, id, rec); err != nil {
				return err
			}
		}
		return nil
	})
}
