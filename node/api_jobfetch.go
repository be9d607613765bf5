package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/libp2p/go-libp2p/core/peer"
)

// CodeNoOutputs: job_fetch of a job that has no outputs (yet).
const CodeNoOutputs = -32022

// JobFetchParams name a job and a new directory for its outputs.
type JobFetchParams struct {
	ID       string `json:"id"`
	Dir      string `json:"dir"`
	TimeoutS int    `json:"timeout_s,omitempty"`
}

// Validate checks the ID's presence and the directory and timeout as
// data_get does.
func (p JobFetchParams) Validate() error {
	if p.ID == "" {
		return fmt.Errorf("id: give a job ID (gleaner job ls)")
	}
	if err := validFetchTimeout(p.TimeoutS); err != nil {
		return err
	}
	return validNewDir(p.Dir)
}

func registerJobFetchAPI(s *rpc.Server, n *Node) {
	rpc.Register(s, "job_fetch", rpc.MethodDoc{
		Summary: "Fetch a job's outputs (by the CID its provider's settlement names) and write them at dir, which must not exist yet.",
		Description: "Every block is checked against the CID, so the files are exactly what the provider answered. Blocks already here " +
			"are not fetched again: a fetch cut short resumes. The provider keeps outputs for its retention window (a week by default).",
		ParamNames: []string{"id", "dir", "timeout_s"},
		Errors: []*rpc.Error{{Code: renting.CodeNoSuchJob, Message: "no such job"}, {Code: CodeNoOutputs, Message: "the job has no outputs"}, errDataUnservable,
			{Code: CodeDataRefused, Message: "the outputs are over the spec's outputs.max_size, or unsafe to write out"}},
	}, func(ctx context.Context, p JobFetchParams) (DataFetchResult, error) {
		j, err := n.renterJobs.Get(p.ID)
		if err != nil {
			return DataFetchResult{}, &rpc.Error{Code: renting.CodeNoSuchJob, Message: err.Error()}
		}
		if j.Outputs == "" {
			why := "its spec has no outputs: section"
			if !renting.Terminal(j.State) {
				why = "it has not ended (state " + j.State + ")"
			} else if spec, err := auction.ParseJobSpec([]byte(j.Spec)); err == nil && spec.Outputs.Path != "" {
				why = "its provider kept none (" + j.Error + ")"
			}
			return DataFetchResult{}, &rpc.Error{Code: CodeNoOutputs, Message: "job " + p.ID + " has no outputs: " + why}
		}
		return n.fetchJobOutputs(ctx, j, p)
	})
}

// fetchJobOutputs fetches the outputs of job j, which has some, from its
// provider, which serves them to this node alone, and writes them at
// p.Dir (openOutputs), held to its spec's outputs.max_size: a provider
// that publishes more than the job could write (data.OutputLimits) is
// refused as the blocks arrive, before anything is written at p.Dir.
func (n *Node) fetchJobOutputs(ctx context.Context, j *renting.JobRecord, p JobFetchParams) (DataFetchResult, error) {
	if err := checkNewDir(p.Dir); err != nil {
		return DataFetchResult{}, err
	}
	c, err := parseDataCID(j.Outputs)
	if err != nil {
		return DataFetchResult{}, err
	}
	maxSize := int64(auction.MaxOutputBytes) // a spec that no longer parses: the most any could say
	if spec, err := auction.ParseJobSpec([]byte(j.Spec)); err == nil && spec.Outputs.MaxBytes > 0 {
		maxSize = spec.Outputs.MaxBytes
	}
	files, blocks := data.OutputLimits(maxSize)
	var sources []peer.ID
	if pid, err := peer.Decode(j.Provider); err == nil {
		cctx, cancel := context.WithTimeout(ctx, renting.DialTimeout)
		renting.LearnAddrs(cctx, n.host, pid)
		_ = n.host.LibP2P().Connect(cctx, peer.AddrInfo{ID: pid})
		cancel()
		sources = []peer.ID{pid}
	}
	was, _ := n.data.Pinned(ctx, c)
	over := func(err error) error {
		if now, _ := n.data.Pinned(ctx, c); now && !was {
			_ = n.data.Unpin(ctx, c) // refused: not kept either; the next GC frees its blocks
		}
		return &rpc.Error{Code: CodeDataRefused, Message: fmt.Sprintf("job %s: its outputs %s exceed what its outputs.max_size %s allows: %v; nothing was written at %s",
			j.ID, j.Outputs, auction.FormatSize(maxSize), err, p.Dir)}
	}
	timeout := DataCIDParams{TimeoutS: p.TimeoutS}.timeout()
	res, err := n.fetchData(ctx, c, timeout, false, data.FetchLimits{MaxBytes: blocks}, sources...)
	if err != nil {
		var rerr *rpc.Error
		if errors.As(err, &rerr) && rerr.Code == CodeDataRefused {
			return res, over(errors.New(rerr.Message))
		}
		return res, err
	}
	res, err = n.openOutputs(ctx, c, p.Dir, res, blocks, files)
	if errors.Is(err, data.ErrTooLarge) || errors.Is(err, data.ErrTooDeep) {
		return res, over(err)
	}
	return res, err
}
