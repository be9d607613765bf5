package renting

import (
	"encoding/json"

	"github.com/gleaner-net/gleaner/node/gangnet"
	"github.com/libp2p/go-libp2p/core/peer"
)

// gangRoster is the roster every member's provider gets with its start
// (wire.JobRequest.Gang): each rank's provider and the CID of the lease
// it holds, read once every member holds an award. nil when a member's
// record lacks either, which the provider refuses as a start without a
// roster.
func (r *Jobs) gangRoster(run *gangRun) []byte {
	self, err := peer.IDFromPrivateKey(r.key)
	if err != nil {
		return nil
	}
	run.mu.Lock()
	snap := run.g.Snapshot()
	run.mu.Unlock()
	ro := gangnet.Roster{Gang: gangnet.Key(snap.ID, self.String()), Size: len(snap.Members)}
	r.mu.Lock()
	defer r.mu.Unlock()
	for rank, m := range snap.Members {
		j := r.jobs[m.Job]
		if j == nil || j.LeaseCID == "" {
			r.log.Warn("gang roster incomplete: a member holds no lease", "gang", snap.ID, "rank", rank)
			return nil
		}
		p, err := peer.Decode(j.Provider)
		if err != nil {
			return nil
		}
		ro.Members = append(ro.Members, gangnet.Member{Rank: rank, Peer: p, Lease: j.LeaseCID})
	}
	b, err := json.Marshal(ro)
	if err != nil {
		return nil
	}
	return b
}
