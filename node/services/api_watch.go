package services

import (
	"context"
	"time"

	"github.com/gleaner-net/gleaner/node/rpc"
)

// serviceWatchEvery is how often service_watch sends a service's view.
const serviceWatchEvery = time.Second

func registerServiceWatchAPI(s *rpc.Server, a API) {
	rpc.RegisterSubscription(s, "service_watch", rpc.MethodDoc{
		Summary: "Subscribe (WebSocket only) to a service's view with its figures (as service_status gives it), once a second.",
		Description: "Ends when the subscription is cancelled or the service goes down. " +
			"At most one view waits for a slow subscriber: a newer one replaces it, so a reader always gets the latest figures.",
		ParamNames: []string{"name"},
		Errors:     []*rpc.Error{{Code: CodeNoSuchService, Message: "no such service"}},
	}, a.Watch)
}

func (a API) Watch(ctx context.Context, p ServiceNameParams) (<-chan ServiceView, error) {
	s, err := a.svc()
	if err != nil {
		return nil, err
	}
	first, err := s.View(p.Name, true)
	if err != nil {
		return nil, &rpc.Error{Code: CodeNoSuchService, Message: err.Error()}
	}
	out := make(chan ServiceView, 1)
	out <- *first
	go watchService(ctx, out, serviceWatchEvery, func() (*ServiceView, error) { return s.View(p.Name, true) })
	return out, nil
}

// watchService sends view's result to out every period until ctx ends or
// View fails (the service is down), then closes out. out holds one view:
// one not yet taken is replaced by the newer, so a slow reader costs no
// memory and gets the latest figures.
func watchService(ctx context.Context, out chan ServiceView, period time.Duration, view func() (*ServiceView, error)) {
	defer close(out)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, err := view()
		if err != nil {
			return
		}
		for {
			select {
			case out <- *v:
			case <-ctx.Done():
				return
			default:
				select { // full: drop the stale view, then send
				case <-out:
				default:
				}
				continue
			}
			break
		}
	}
}
