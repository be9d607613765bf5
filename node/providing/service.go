package providing

import (
	"context"
	"errors"
	"time"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/libp2p/go-libp2p/core/peer"
)

// serve registers a running service job's container port with the node's
// forwarder (Config.OnService) for the lease's renter, for jobs this run
// started and ones adopted after a restart alike. It reports whether it
// did, so that follow unregisters it when the run ends.
func (pj *Provider) serve(ctx context.Context, al *activeLease, job executor.Job) bool {
	if pj.onService == nil || pj.onServiceEnd == nil {
		return false
	}
	svc, ok := job.(executor.Service)
	if !ok {
		return false
	}
	renter, err := peer.Decode(al.lease.Renter)
	if err != nil {
		pj.log.Warn("service job's renter is not a peer ID; not served", "job", al.lease.JobID, "err", err)
		return false
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addr, err := svc.ServiceAddr(actx)
	if errors.Is(err, executor.ErrNoService) {
		return false
	}
	if err != nil {
		pj.log.Warn("service job's address unknown; not served", "job", al.lease.JobID, "err", err)
		return false
	}
	pj.onService(al.lease.JobID, renter, addr)
	return true
}
