package services

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// Application error codes of the service namespace (see docs/RPC.md).
const (
	CodeNoSuchService = -32023 // no service by that name on this node
	// CodeServiceNotPlaced: service_up with wait_s found no replica
	// placed; the error's data is the service (ServiceView), whose up
	// says whether it was taken down (not_placed) or kept (timed_out).
	CodeServiceNotPlaced = -32024
)

// MaxServiceUpWait bounds service_up's wait_s.
const MaxServiceUpWait = time.Hour

// ServiceUpParams are service_up's parameters.
type ServiceUpParams struct {
	Spec string `json:"spec" doc:"the service spec as YAML (kind: service; see docs/SERVICES.md)"`
	Port int    `json:"port,omitempty" doc:"the gateway's port; 0 or absent: the spec's gateway.listen port, else any free port"`
	// Listen overrides the spec's service.gateway.listen.
	Listen string `json:"listen,omitempty" doc:"host:port the gateway listens on (0.0.0.0:8080: every interface, calls then need the service's token); absent: the spec's gateway.listen, else 127.0.0.1"`
	// WaitS: docs/SERVICES.md, "When no replica can be placed".
	WaitS int `json:"wait_s,omitempty" doc:"seconds to wait for a replica to be placed (its job running on a provider), at most 3600; the call fails with -32024 if none is: taken down when every replica attempt ended without being placed, kept when the wait ran out first. 0 or absent: return once the replicas are submitted"`
}

// Validate bounds the port and checks the listen address.
func (p ServiceUpParams) Validate() error {
	if p.Port < 0 || p.Port > 65535 {
		return errors.New("port: must be 0..65535")
	}
	if p.Listen != "" {
		if p.Port != 0 {
			return errors.New("port: give listen (host:port) or port, not both")
		}
		if _, err := auction.ParseGatewayListen(p.Listen); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	if p.Spec == "" {
		return errors.New("spec: a service spec is required")
	}
	if p.WaitS < 0 || time.Duration(p.WaitS)*time.Second > MaxServiceUpWait {
		return fmt.Errorf("wait_s: must be 0..%d", int(MaxServiceUpWait.Seconds()))
	}
	return nil
}

// ServiceNameParams name one service.
type ServiceNameParams struct {
	Name string `json:"name"`
}

// Validate requires a name.
func (p ServiceNameParams) Validate() error {
	if p.Name == "" {
		return errors.New("name: a service name is required (see `gleaner service ls`)")
	}
	return nil
}

// API is the service namespace's handlers, over the renter's services
// (nil while the node starts).
type API struct{ services func() *Manager }

// NewAPI is the service namespace served from what services returns (nil:
// the node is still starting).
func NewAPI(services func() *Manager) API { return API{services} }

// RegisterAPI registers the service namespace on s, served from what
// services returns (nil: the node is still starting).
func RegisterAPI(s *rpc.Server, services func() *Manager) {
	a := NewAPI(services)
	rpc.Register(s, "service_up", rpc.MethodDoc{
		Summary:     "Run a service: place replicas.min replicas as jobs and serve them through a gateway on 127.0.0.1, or on listen with a bearer token.",
		Description: "Returns once the gateway listens and the replicas are submitted, or with wait_s once a replica is placed (its job runs on a provider): if none is, it fails with -32024 naming why, having taken the service down when every replica attempt ended without being placed, or kept it when wait_s ran out first (the error's data is the service, with up saying which). Replicas take traffic once they run and pass their readiness check (service_status). Beyond loopback every call needs the token in token_file.",
		ParamNames:  []string{"spec", "port", "listen", "wait_s"},
		Errors: []*rpc.Error{{Code: renting.CodeBadJobSpec, Message: "invalid service spec"},
			{Code: CodeServiceNotPlaced, Message: "no replica of the service could be placed"}},
	}, a.Up)
	rpc.Register(s, "service_list", rpc.MethodDoc{Summary: "Every service this node runs, by name."}, a.List)
	rpc.Register(s, "service_status", rpc.MethodDoc{Summary: "One service: its gateway, its figures and its replicas' jobs.", ParamNames: []string{"name"},
		Errors: []*rpc.Error{{Code: CodeNoSuchService, Message: "no such service"}}}, a.Status)
	rpc.Register(s, "service_down", rpc.MethodDoc{Summary: "Stop a service: cancel its replica jobs and close its gateway.", ParamNames: []string{"name"},
		Errors: []*rpc.Error{{Code: CodeNoSuchService, Message: "no such service"}}}, a.Down)
	registerServiceScaleAPI(s, a)
	registerServiceLogsAPI(s, a)
	registerServiceWatchAPI(s, a)
}

func (a API) svc() (*Manager, error) {
	m := a.services()
	if m == nil {
		return nil, errors.New("this node is still starting; try again")
	}
	return m, nil
}

func (a API) Up(ctx context.Context, p ServiceUpParams) (*ServiceView, error) {
	s, err := a.svc()
	if err != nil {
		return nil, err
	}
	if p.WaitS > 0 {
		v, err := s.upAndWait(ctx, []byte(p.Spec), p.Listen, p.Port, time.Duration(p.WaitS)*time.Second)
		var np *ServiceNotPlacedError
		switch {
		case errors.Is(err, auction.ErrBadJobSpec):
			return nil, &rpc.Error{Code: renting.CodeBadJobSpec, Message: err.Error()}
		case errors.As(err, &np):
			return nil, &rpc.Error{Code: CodeServiceNotPlaced, Message: np.Error(), Data: np.View}
		}
		return v, err
	}
	rec, _, err := s.up([]byte(p.Spec), p.Listen, p.Port)
	if errors.Is(err, auction.ErrBadJobSpec) {
		return nil, &rpc.Error{Code: renting.CodeBadJobSpec, Message: err.Error()}
	}
	if err != nil {
		return nil, err
	}
	return s.View(rec.Name, false)
}

func (a API) List(ctx context.Context, _ struct{}) ([]ServiceView, error) {
	s, err := a.svc()
	if err != nil {
		return nil, err
	}
	return s.list(), nil
}

func (a API) Status(ctx context.Context, p ServiceNameParams) (*ServiceView, error) {
	s, err := a.svc()
	if err != nil {
		return nil, err
	}
	v, err := s.View(p.Name, true)
	if err != nil {
		return nil, &rpc.Error{Code: CodeNoSuchService, Message: err.Error()}
	}
	return v, nil
}

func (a API) Down(ctx context.Context, p ServiceNameParams) (*ServiceView, error) {
	s, err := a.svc()
	if err != nil {
		return nil, err
	}
	v, verr := s.View(p.Name, true)
	if verr != nil {
		return nil, &rpc.Error{Code: CodeNoSuchService, Message: verr.Error()}
	}
	if _, err := s.down(p.Name); err != nil {
		return nil, err
	}
	v.URL, v.Gateway = "", "down"
	return v, nil
}
