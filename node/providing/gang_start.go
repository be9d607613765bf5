package providing

import (
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
// Only the process executor is joined for now: a Docker container
// reaches none of the daemon's listeners (the service firewall closes the
// host to it, executor/service_net.go), so under Docker a member runs
// without GLEANER_GANG_PEERS and the log says so (docs/GANG_NETWORK.md).
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
	if pj.gangs == nil || pj.exec == nil || pj.exec.Kind() != "process" {
		pj.log.Warn("no gang network under this executor yet: the member runs without GLEANER_GANG_PEERS", "job", al.lease.JobID)
		return nil
	}
	m, err := pj.gangs.Join(gangnet.ProcessLocal(ro, g.Rank, wire.LeaseCID(al.raw)))
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
