package providing

import (
	"context"
	"errors"
	"fmt"

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
	m, err := pj.gangs.Join(local)
	if err != nil {
		return err
	}
	al.gang = m
	if es.Provided == nil {
		es.Provided = map[string]string{}
	}
	for k, v := range m.Env() {
		es.Provided[k] = v
	}
	return nil
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
