package node

import (
	"context"
	"errors"
	"sort"

	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// JobSubmitParams are job_submit's parameters.
type JobSubmitParams struct {
	Spec     string            `json:"spec" doc:"the job spec as YAML (see docs/JOBS.md)"`
	Secrets  map[string]string `json:"secrets,omitempty" doc:"environment secrets, sent to the winning provider only, never stored"`
	Provider string            `json:"provider,omitempty" doc:"award only to this provider (peer ID): a canary, or a job for a provider you trust"`
	// RegistryAuth: credentials for a private image, sent to the winning
	// provider only, never stored (the spec's registry_auth_file).
	RegistryAuth *wire.RegistryAuth `json:"registry_auth,omitempty" doc:"credentials for the spec's private image (username+password or identity_token, optional server); sent to the winning provider only, never stored"`
}

// Validate bounds the credentials.
func (p JobSubmitParams) Validate() error {
	if p.RegistryAuth != nil {
		return p.RegistryAuth.Validate()
	}
	return nil
}

// JobIDParams name one job.
type JobIDParams struct {
	ID string `json:"id"`
}

// Validate requires an ID.
func (p JobIDParams) Validate() error {
	if p.ID == "" {
		return errors.New("id: a job ID is required (see `gleaner job ls`)")
	}
	return nil
}

// JobLogsResult is job_logs' result: the retained tail of the output.
type JobLogsResult struct {
	Logs string `json:"logs"`
}

type jobAPI struct{ n *Node }

func registerJobAPI(s *rpc.Server, n *Node) {
	a := jobAPI{n}
	rpc.Register(s, "job_submit", rpc.MethodDoc{
		Summary:     "Submit a job: the node runs a reverse auction, signs a lease with the winner and follows the job.",
		Description: "Returns at once with the job record (state auction); follow it with job_follow or job_status.",
		ParamNames:  []string{"spec", "secrets", "provider"},
		Errors:      []*rpc.Error{{Code: renting.CodeBadJobSpec, Message: "invalid job spec"}},
	}, a.Submit)
	rpc.Register(s, "job_list", rpc.MethodDoc{Summary: "Every job this node has submitted, newest first."}, a.List)
	rpc.Register(s, "job_status", rpc.MethodDoc{Summary: "One job's record.", ParamNames: []string{"id"}, Errors: []*rpc.Error{{Code: renting.CodeNoSuchJob, Message: "no such job"}}}, a.Status)
	rpc.Register(s, "job_logs", rpc.MethodDoc{Summary: "The retained tail (256 KiB) of a job's output, kept across restarts of this node.", ParamNames: []string{"id"}}, a.Logs)
	rpc.Register(s, "job_cancel", rpc.MethodDoc{Summary: "Cancel a job; the provider stops it with the lease's notice.", ParamNames: []string{"id"}}, a.Cancel)
	rpc.Register(s, "job_explain", rpc.MethodDoc{Summary: "Why the auction came out as it did: feasibility funnel, quotes, ranking and clearing price.", ParamNames: []string{"id"}}, a.Explain)
	rpc.RegisterSubscription(s, "job_follow", rpc.MethodDoc{Summary: "Subscribe (WebSocket only) to a job's state changes and log output until it ends.", ParamNames: []string{"id"}}, a.Follow)
}

func (a jobAPI) Submit(ctx context.Context, p JobSubmitParams) (*renting.JobRecord, error) {
	spec, err := a.n.resolveInputs(ctx, []byte(p.Spec))
	if err != nil {
		return nil, dataError(err)
	}
	j, err := a.n.renterJobs.Submit(spec, p.Secrets, renting.SubmitOptions{Provider: p.Provider, RegistryAuth: p.RegistryAuth})
	if errors.Is(err, auction.ErrBadJobSpec) {
		return nil, &rpc.Error{Code: renting.CodeBadJobSpec, Message: err.Error()}
	}
	return j, err
}

func (a jobAPI) List(ctx context.Context, _ struct{}) ([]renting.JobRecord, error) {
	out := a.n.renterJobs.Snapshot(nil)
	for i := range out {
		out[i].Explain, out[i].Lease = nil, nil
	}
	out = append(out, a.n.renterJobs.Arrays()...) // each array's progress, beside its shards' jobs
	out = append(out, a.n.renterJobs.Gangs()...)  // each gang's, beside its members' jobs
	sort.Slice(out, func(i, k int) bool { return out[i].Created.After(out[k].Created) })
	return out, nil
}

func (a jobAPI) Status(ctx context.Context, p JobIDParams) (*renting.JobRecord, error) {
	j, err := a.n.renterJobs.Get(p.ID)
	if err != nil {
		return nil, &rpc.Error{Code: renting.CodeNoSuchJob, Message: err.Error()}
	}
	if j.Explain != nil && j.Price > 0 && j.Explain.Clearing != nil && j.Explain.Clearing.Price == j.Price {
		j.PriceWhy = j.Explain.Clearing // the round that set the lease's price
	}
	j.Explain = nil
	if id, err := peer.Decode(j.Provider); err == nil && j.Provider != "" {
		j.ProviderPath = a.n.host.PathTo(id)
	}
	return j, nil
}

func (a jobAPI) Logs(ctx context.Context, p JobIDParams) (JobLogsResult, error) {
	b, err := a.n.renterJobs.LogsOf(p.ID)
	if err != nil {
		return JobLogsResult{}, &rpc.Error{Code: renting.CodeNoSuchJob, Message: err.Error()}
	}
	return JobLogsResult{Logs: string(b)}, nil
}

func (a jobAPI) Cancel(ctx context.Context, p JobIDParams) (*renting.JobRecord, error) {
	return a.n.renterJobs.Cancel(ctx, p.ID)
}

func (a jobAPI) Explain(ctx context.Context, p JobIDParams) (*renter.Explain, error) {
	j, err := a.n.renterJobs.Get(p.ID)
	if err != nil {
		return nil, &rpc.Error{Code: renting.CodeNoSuchJob, Message: err.Error()}
	}
	if j.Explain == nil {
		return &renter.Explain{}, nil
	}
	return j.Explain, nil
}

func (a jobAPI) Follow(ctx context.Context, p JobIDParams) (<-chan renting.JobEvent, error) {
	ch, err := a.n.renterJobs.Follow(ctx, p.ID)
	if err != nil {
		return nil, &rpc.Error{Code: renting.CodeNoSuchJob, Message: err.Error()}
	}
	return ch, nil
}

// LeaseView is one lease as the provider keeps it.
type LeaseView struct {
	CID   string         `json:"cid"`
	Lease *auction.Lease `json:"lease"`
	// Active is true while the lease holds GPUs on this provider.
	Active bool `json:"active"`
	// State is awarded, started, ended or expired (an award its renter
	// never started in time).
	State string `json:"state"`
}

func registerLeaseAPI(s *rpc.Server, n *Node) {
	rpc.Register(s, "lease_list", rpc.MethodDoc{Summary: "The co-signed leases this node has accepted as a provider."},
		func(ctx context.Context, _ struct{}) ([]LeaseView, error) {
			out := []LeaseView{}
			pj := n.providerJobs
			err := n.store.ForEach(store.BucketLeases, func(jobID string, raw []byte) error {
				rec, err := providing.ReadRecord(raw)
				if err != nil {
					return err
				}
				l, sl, err := auction.DecodeSignedLease(rec.Lease, true)
				if err != nil {
					return nil // a lease that no longer verifies is not shown
				}
				out = append(out, LeaseView{CID: sl.CID().String(), Lease: l, Active: pj.Holds(jobID), State: string(rec.State)})
				return nil
			})
			return out, err
		})
}
