package node

import (
	"context"
	"time"

	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/earnings"
	"github.com/gleaner-net/gleaner/node/rpc"
)

func registerEarningsAPI(s *rpc.Server, n *Node) {
	rpc.Register(s, "ledger_earnings", rpc.MethodDoc{
		Summary:     "What this node earned as a provider: per UTC day and per lease (job, renter, GPU-seconds, micro-credits earned), and the fill rate: leased over offered GPU-seconds.",
		Description: "From this node's own settlements and, for leases still running, its scheduler. Offered GPU-time is what this node recorded (offered_since says from when).",
		ParamNames:  []string{"days"},
	}, func(ctx context.Context, p earnings.PeriodParams) (earnings.Result, error) {
		return n.earnings(p.From(time.Now()), time.Now())
	})
	rpc.Register(s, "ledger_spend", rpc.MethodDoc{
		Summary:     "What this node spent as a renter: per job name and per UTC day, with each lease, in micro-credits.",
		Description: "Each lease counts its provider's settlement once replicated, before that the charge the provider reported at the job's end, and before that the vouchers signed (source says which).",
		ParamNames:  []string{"days"},
	}, func(ctx context.Context, p earnings.PeriodParams) (earnings.SpendResult, error) {
		return n.spend(p.From(time.Now()), time.Now())
	})
}

// readOwnFeed walks this node's own feed once.
func (n *Node) readOwnFeed() (earnings.OwnFeed, error) {
	self := n.host.ID().String()
	f := earnings.NewOwnFeed(self)
	h, ok, err := n.ledger.Head(self)
	if err != nil || !ok {
		return f, err
	}
	err = n.ledger.Walk(self, 1, h.Seq, func(e *ledger.Entry, _ *ledger.SignedEntry) error {
		f.Add(e)
		return nil
	})
	return f, err
}

func (n *Node) earnings(from, to time.Time) (earnings.Result, error) {
	f, err := n.readOwnFeed()
	if err != nil {
		return earnings.Result{From: from, To: to.UTC(), Days: []earnings.Day{}, Jobs: []earnings.Job{}}, err
	}
	var active []sched.Info
	if n.providerJobs != nil {
		active = n.providerJobs.Leases(to)
	}
	offered, err := n.offeredDays()
	if err != nil {
		return earnings.Result{From: from, To: to.UTC(), Days: []earnings.Day{}, Jobs: []earnings.Job{}}, err
	}
	return earnings.Of(f, active, offered, from, to), nil
}
