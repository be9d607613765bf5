package services

import (
	"context"
	"errors"
	"fmt"

	"github.com/gleaner-net/gleaner/node/rpc"
)

// ServiceLogsParams are service_logs' parameters.
type ServiceLogsParams struct {
	Name    string `json:"name"`
	Replica *int   `json:"replica,omitempty" doc:"only this replica's (its index in service_status); absent: every replica's"`
}

// Validate requires a name and bounds the replica index from below (the
// upper bound is the service's).
func (p ServiceLogsParams) Validate() error {
	if p.Name == "" {
		return errors.New("name: a service name is required (see `gleaner service ls`)")
	}
	if p.Replica != nil && *p.Replica < 0 {
		return fmt.Errorf("replica: %d is not a replica index (0 or more)", *p.Replica)
	}
	return nil
}

// ServiceReplicaLogs is one replica job's retained output.
type ServiceReplicaLogs struct {
	Index int    `json:"index"`
	Job   string `json:"job"`
	Logs  string `json:"logs" doc:"the retained tail (256 KiB) of the job's output, as job_logs returns it"`
}

// ServiceLogsResult is service_logs' result, replica 0 first.
type ServiceLogsResult struct {
	Replicas []ServiceReplicaLogs `json:"replicas"`
}

func registerServiceLogsAPI(s *rpc.Server, a API) {
	rpc.Register(s, "service_logs", rpc.MethodDoc{
		Summary:     "The retained output of a service's replica jobs (all, or one by index).",
		Description: "Each replica's is job_logs of its current job; follow them live with job_follow on each replica's job (as `gleaner service logs --follow` does).",
		ParamNames:  []string{"name", "replica"},
		Errors:      []*rpc.Error{{Code: CodeNoSuchService, Message: "no such service"}},
	}, a.Logs)
}

// replicaJobs returns the current replica jobs of service name (one when
// replica is set), as the rpc errors service_logs and job following give.
func (a API) replicaJobs(name string, replica *int) ([]ServiceReplica, error) {
	s, err := a.svc()
	if err != nil {
		return nil, err
	}
	v, err := s.View(name, false)
	if err != nil {
		return nil, &rpc.Error{Code: CodeNoSuchService, Message: err.Error()}
	}
	if replica == nil {
		return v.Replicas, nil
	}
	if *replica < 0 || *replica >= len(v.Replicas) {
		return nil, &rpc.Error{Code: rpc.CodeInvalidParams, Message: fmt.Sprintf("invalid params: replica: service %s has replicas 0..%d, not %d", name, len(v.Replicas)-1, *replica)}
	}
	return v.Replicas[*replica : *replica+1], nil
}

func (a API) Logs(ctx context.Context, p ServiceLogsParams) (*ServiceLogsResult, error) {
	reps, err := a.replicaJobs(p.Name, p.Replica)
	if err != nil {
		return nil, err
	}
	m, err := a.svc()
	if err != nil {
		return nil, err
	}
	out := &ServiceLogsResult{Replicas: []ServiceReplicaLogs{}}
	for _, r := range reps {
		b, err := m.jobs.LogsOf(r.Job)
		if err != nil {
			b = nil // a replica whose record is gone has no logs to show
		}
		out.Replicas = append(out.Replicas, ServiceReplicaLogs{Index: r.Index, Job: r.Job, Logs: string(b)})
	}
	return out, nil
}
