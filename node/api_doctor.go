package node

import (
	"context"

	"github.com/gleaner-net/gleaner/node/doctor"
	"github.com/gleaner-net/gleaner/node/rpc"
)

type doctorAPI struct{ n *Node }

// registerDoctorAPI adds node_doctor. The clock protocol it asks peers is
// served by every node from the start (startHost), RPC or not.
func registerDoctorAPI(s *rpc.Server, n *Node) {
	a := doctorAPI{n}
	rpc.Register(s, "node_doctor", rpc.MethodDoc{
		Summary:     "What `gleaner doctor` needs of the running node: listen addresses, AutoNAT reachability and connected peers' clock skew.",
		Description: "Asks up to 16 connected peers, chosen at random and those this node dialled first, for their time (/gleaner/N/clock/1) in parallel; answers within about 2 s. median_skew_ms is the median over the peers that answered.",
	}, a.Doctor)
}

func (a doctorAPI) Doctor(ctx context.Context, _ struct{}) (doctor.Result, error) {
	h := a.n.host
	r := doctor.Result{
		Network:      h.Network(),
		ListenAddrs:  addrStrings(h.LibP2P().Network().ListenAddresses()),
		Addrs:        addrStrings(h.Addrs()),
		Reachability: h.Reachability(),
	}
	ps := h.Peers()
	r.Peers = len(ps)
	doctor.SurveyClocks(ctx, h, &r, ps)
	return r, nil
}
