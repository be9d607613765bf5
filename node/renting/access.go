package renting

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// InputAccess lets a lease's provider fetch the job's inputs from this
// node, which serves its data to nobody else (node/node_access.go).
type InputAccess interface {
	// GrantInputs serves inputs to provider until until (and a short
	// grace after), across restarts.
	GrantInputs(job string, provider peer.ID, inputs []cid.Cid, until time.Time) error
	// RevokeInputs ends that grant.
	RevokeInputs(job string, provider peer.ID, inputs []cid.Cid) error
}

// inputCIDs are the CIDs of a spec's inputs.
func inputCIDs(spec *auction.JobSpec) []cid.Cid {
	var out []cid.Cid
	for _, in := range spec.Inputs {
		if c, err := cid.Decode(in.CID); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// grantInputs lets the lease's provider fetch the job's inputs until the
// lease is over, and returns the revocation for when its run ends here.
// The grant is made before the start is sent, so the provider's first
// want is served; made again on a re-attach, it covers a job started by a
// node from before access control, whose grant was never recorded. A run
// that ends because this node is stopping does not revoke: the lease goes
// on, and the restarted node must serve the provider from its first
// moment (the grant is in node.db), not only once it has re-attached.
func (r *Jobs) grantInputs(id string, spec *auction.JobSpec, l *auction.Lease) func() {
	ins := inputCIDs(spec)
	if r.access == nil || len(ins) == 0 {
		return func() {}
	}
	pid, err := peer.Decode(l.Provider)
	if err != nil {
		return func() {}
	}
	if err := r.access.GrantInputs(id, pid, ins, leaseOver(l)); err != nil {
		r.log.Warn("the job's inputs are not granted to its provider: it cannot fetch them", "job", id, "provider", l.Provider, "err", err)
	}
	return func() {
		if r.bg.Err() != nil {
			return // stopping, not the lease's end: the grant lapses with the lease
		}
		if err := r.access.RevokeInputs(id, pid, ins); err != nil {
			r.log.Warn("the grant of the job's inputs was not revoked; it lapses at the lease's end", "job", id, "err", err)
		}
	}
}
