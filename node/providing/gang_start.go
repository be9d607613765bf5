package providing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/gangnet"
	"github.com/gleaner-net/gleaner/node/wire"
)

// GangNet is the network gang members' containers reach each other
// through (gangnet.Net, docs/GANG_NETWORK.md).
type GangNet interface {
	Join(gangnet.Local) (*gangnet.Membership, error)
}

// joinGang puts a gang member in its gang's network before its container
// starts, and gives the container GLEANER_GANG_PEERS (with the gang's ID,
// rank and size) through es.Provided. The roster comes with the start
// (wire.JobRequest.Gang), since the members' leases exist only once every
// member holds an award; it is the renter's word, so it is checked
// against what this provider signed: the gang's name is derived from the
// lease's renter and the spec's gang, so that a renter cannot join or
// block another's gang, the size is the spec's, and Join checks that the
// roster names this provider at the spec's rank under this lease.
//
// Under the process executor the listeners are on the host's loopback,
// made now. A Docker container has a network namespace of its own (no
// network but its loopback, for a batch job), which exists only once it
// runs: its entries are fixed ports on that loopback, and the listeners
// are made inside it once it runs (openGang).
func (pj *Provider) joinGang(al *activeLease, req wire.JobRequest, spec *auction.JobSpec, es *executor.Spec) error {
	g := spec.GangOf
	if g == nil {
		return nil
	}
	if len(req.Gang) == 0 {
		pj.log.Warn("gang member started without a roster (an older renter): it runs without GLEANER_GANG_PEERS", "job", al.lease.JobID)
		return nil
	}
	ro, err := gangnet.DecodeRoster(req.Gang)
	if err != nil {
		return err
	}
	if want := gangnet.Key(g.ID, al.lease.Renter); ro.Gang != want {
		return fmt.Errorf("the gang roster names gang %q, not this renter's gang %q (%s)", ro.Gang, g.ID, want)
	}
	if ro.Size != g.Size {
		return fmt.Errorf("the gang roster has %d members; the spec signed says %d", ro.Size, g.Size)
	}
	var local gangnet.Local
	switch kind := pj.exec.Kind(); {
	case pj.gangs == nil:
		pj.log.Warn("no gang network on this node: the member runs without GLEANER_GANG_PEERS", "job", al.lease.JobID)
		return nil
	case kind == "process":
		local = gangnet.ProcessLocal(ro, g.Rank, wire.LeaseCID(al.raw))
	default:
		// A container of its own network namespace: its listeners are
		// made there once it runs (openGang).
		local = gangnet.Local{Roster: ro, Rank: g.Rank, Lease: wire.LeaseCID(al.raw), InContainer: true}
	}
	m, err := pj.joinOnceFree(local)
	if err != nil {
		return err
	}
	al.gang = m
	if local.InContainer {
		// Its entries are fixed ports on the container's loopback, so a
		// provider that adopts the container after a crash can give it
		// the same GLEANER_GANG_PEERS again (rejoinGang).
		if err := pj.saveGang(al, GangPlace{Roster: req.Gang, Rank: g.Rank}); err != nil {
			pj.log.Warn("gang place not saved: after a crash the member could not rejoin its gang", "job", al.lease.JobID, "err", err)
		}
	}
	if es.Provided == nil {
		es.Provided = map[string]string{}
	}
	for k, v := range m.Env() {
		es.Provided[k] = v
	}
	return nil
}

// joinWait bounds how long a member's start waits for the member of its
// gang's last placement to leave this provider.
const joinWait = 10 * time.Second

// joinOnceFree joins local's gang, waiting up to joinWait while a member
// of the gang's last placement is still joined here: its run has ended
// (the renter placed the gang again only once every member had), but its
// goroutine may not have left the gang's network yet.
func (pj *Provider) joinOnceFree(local gangnet.Local) (*gangnet.Membership, error) {
	deadline := time.Now().Add(joinWait)
	for {
		m, err := pj.gangs.Join(local)
		if !errors.Is(err, gangnet.ErrAlreadyJoined) || time.Now().After(deadline) {
			return m, err
		}
		select {
		case <-pj.bg.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// leaveGang ends the member's place in its gang's network: its listeners
// close and its forwarded connections end with its run.
func (pj *Provider) leaveGang(al *activeLease) {
	if al.gang != nil {
		al.gang.Leave()
		al.gang = nil
	}
}

// openGang makes a containerised member's listeners inside its
// container's network namespace, now that it runs. A member that cannot
// be reached is left to run: its rendezvous fails in the job, which ends
// the gang with the job's own words; the log says why.
func (pj *Provider) openGang(ctx context.Context, al *activeLease, job executor.Job) {
	if al.gang == nil || !al.gang.InContainer() {
		return
	}
	err := errors.New("the executor's jobs have no network namespace of their own")
	if ns, ok := job.(executor.Netnser); ok {
		var path string
		if path, err = ns.Netns(ctx); err == nil {
			err = al.gang.Open(gangnet.Netns(path))
		}
	}
	if err != nil {
		pj.log.Warn("gang member's network not opened: it cannot reach the other members", "job", al.lease.JobID, "err", err)
	}
}

// saveGang keeps the member's gang place in its lease's record, from
// which rejoinGang joins the gang again after a crash.
func (pj *Provider) saveGang(al *activeLease, place GangPlace) error {
	if pj.crashed() {
		return errCrashed
	}
	return pj.store.Update(func(tx Tx) error {
		var rec Record
		if err := tx.Get(al.lease.JobID, &rec); err != nil {
			return err
		}
		if !bytes.Equal(rec.Lease, al.raw) {
			return nil // another lease of this job ID's
		}
		rec.Gang = &place
		return tx.Put(al.lease.JobID, rec)
	})
}

// rejoinGang puts an adopted gang member back in its gang's network, as
// its start did before the crash: the same roster, rank and lease, and
// the same fixed entries on the container's loopback, which its
// GLEANER_GANG_PEERS still names; the listeners the crash closed are
// made again inside the running container. Connections the member had
// open through the crashed daemon were cut with it; a member that dials
// again (a rendezvous's retry) reaches the others. A member that cannot
// rejoin runs on without its gang, which its job's own rendezvous shows
// and the gang's renter handles as a member's failure.
func (pj *Provider) rejoinGang(ctx context.Context, al *activeLease, place *GangPlace, job executor.Job) {
	if place == nil {
		return
	}
	if pj.gangs == nil {
		pj.log.Warn("adopted gang member not rejoined: no gang network on this node", "job", al.lease.JobID)
		return
	}
	ro, err := gangnet.DecodeRoster(place.Roster)
	if err == nil {
		al.gang, err = pj.gangs.Join(gangnet.Local{Roster: ro, Rank: place.Rank, Lease: wire.LeaseCID(al.raw), InContainer: true})
	}
	if err != nil {
		pj.log.Warn("adopted gang member not rejoined: it cannot reach the other members", "job", al.lease.JobID, "err", err)
		return
	}
	pj.openGang(ctx, al, job)
	pj.log.Info("adopted gang member rejoined its gang's network", "job", al.lease.JobID, "gang", ro.Gang, "rank", place.Rank)
}
