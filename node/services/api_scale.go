package services

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// ServiceScaleParams are service_scale's parameters.
type ServiceScaleParams struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas" doc:"1..32 fixes the replica count; 0 gives it back to the spec's replicas.min or its autoscaler"`
}

// Validate requires a name and bounds the count.
func (p ServiceScaleParams) Validate() error {
	if p.Name == "" {
		return errors.New("name: a service name is required (see `gleaner service ls`)")
	}
	if p.Replicas < 0 || p.Replicas > auction.MaxServiceReplicas {
		return fmt.Errorf("replicas: must be 1..%d, or 0 for the spec's count or its autoscaler", auction.MaxServiceReplicas)
	}
	return nil
}

func registerServiceScaleAPI(s *rpc.Server, a API) {
	rpc.Register(s, "service_scale", rpc.MethodDoc{
		Summary: "Fix a service's replica count (1..32), or give it back to the spec and its autoscaler (0).",
		Description: "Returns at once with the new target; the service adds replicas (new jobs, each auctioned) or cancels its highest ones, " +
			"never the floor's, at its next sync (service_status shows them).",
		ParamNames: []string{"name", "replicas"},
		Errors:     []*rpc.Error{{Code: CodeNoSuchService, Message: "no such service"}},
	}, a.Scale)
}

func (a API) Scale(ctx context.Context, p ServiceScaleParams) (*ServiceView, error) {
	s, err := a.svc()
	if err != nil {
		return nil, err
	}
	if err := s.scale(p.Name, p.Replicas); err != nil {
		if strings.HasPrefix(err.Error(), "no service ") {
			return nil, &rpc.Error{Code: CodeNoSuchService, Message: err.Error()}
		}
		return nil, err
	}
	return s.View(p.Name, false)
}
