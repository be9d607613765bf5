package node

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/gateway"
)

// autoscaler decides how many replicas a service runs (docs/SERVICES.md,
// "Autoscaling"). The services loop asks it once per sync.
type autoscaler struct {
	svc auction.Service
}

func newAutoscaler(svc auction.Service) *autoscaler { return &autoscaler{svc: svc} }

// want returns how many replicas the service should run at now, given the
// gateway's figures and the number it runs (current), and why it changed
// (empty when it did not).
func (a *autoscaler) want(now time.Time, st gateway.Stats, current int) (int, string) {
	_, _, _ = now, st, current
	return a.svc.Replicas.Min, ""
}
