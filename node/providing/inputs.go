package providing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/ipfs/go-cid"
)

// Data brings a job's input DAGs to this node and reads them out, and
// keeps its outputs: the node's block exchange and store (node/data).
type Data interface {
	// Fetch gets the whole DAG under c into the store, checking every
	// block against its CID, and keeps it there; it returns the DAG's size.
	Fetch(ctx context.Context, c cid.Cid) (int64, error)
	// Tar writes the DAG under c as a tar stream, bounded by max bytes.
	Tar(ctx context.Context, c cid.Cid, w io.Writer, max int64) error
	// KeepOutputs keeps a tar stream of a job's results, sealed to the
	// lease's renter (a peer ID) so that only it can read them and served
	// to it alone, pinned until until, and returns the CID and the
	// entries it skipped (links, devices).
	KeepOutputs(ctx context.Context, r io.Reader, until time.Time, renter string) (root cid.Cid, skipped []string, err error)
}

// DefaultInputFetchTimeout bounds the fetch of a job's inputs before it
// starts (Config.InputFetchTimeout): the lease's clock runs meanwhile
// (unbilled, but the window is the renter's), and an input nobody serves
// must fail the start within minutes, not at the lease's end.
const DefaultInputFetchTimeout = 20 * time.Minute

// errNoInputs: a job with inputs on a node that cannot fetch any.
var errNoInputs = errors.New("this provider cannot fetch job inputs")

// fetchInputs gets every input of spec into the store before the job
// starts and fills es.Inputs with their mounts. The fetch is not billed:
// the meter starts when the container runs. It ends early when the renter
// cancels or ctx ends.
func (pj *Provider) fetchInputs(ctx context.Context, al *activeLease, spec *auction.JobSpec, es *executor.Spec, send func(wire.Event) error) error {
	if len(spec.Inputs) == 0 {
		return nil
	}
	if spec.Unresolved() {
		// The renter's node replaces src by CIDs before the auction; a
		// spec that still names a path on the renter's machine was not
		// made by one, and names nothing this node could fetch.
		return errors.New("an input names a path on the renter's machine (src), not a CID")
	}
	if pj.data == nil {
		return errNoInputs
	}
	ctx, cancel := context.WithTimeout(ctx, pj.inputTimeout)
	defer cancel()
	go func() {
		select {
		case <-al.cancelled:
			cancel()
		case <-ctx.Done():
		}
	}()
	_ = send(wire.Event{Type: wire.EventStatus, Status: wire.StatusFetching, Error: fmt.Sprintf("%d input(s)", len(spec.Inputs))})
	for i, in := range spec.Inputs {
		c, err := cid.Decode(in.CID)
		if err != nil {
			return fmt.Errorf("inputs[%d]: %v", i, err)
		}
		began := time.Now()
		size, err := pj.data.Fetch(ctx, c)
		if err != nil {
			return fmt.Errorf("inputs[%d] %s: %w", i, in.CID, err)
		}
		pj.log.Info("job input fetched", "job", al.lease.JobID, "cid", in.CID, "bytes", size, "took", time.Since(began).Round(time.Millisecond))
		es.Inputs = append(es.Inputs, executor.Input{
			Target: in.Path,
			Bytes:  max(size, 1),
			// The store holds the DAG from here on (Fetch pinned it).
			Tar: func(ctx context.Context, w io.Writer) error { return pj.data.Tar(ctx, c, w, size) },
		})
	}
	return nil
}

// InputsFailed starts the not-started error of a job whose inputs this
// provider could not fetch. Like a failed pull it fails alike on every
// provider when nobody serves the data, so the renter counts it apart.
const InputsFailed = "the job's inputs could not be fetched: "

// DefaultOutputRetention is how long a job's outputs stay pinned for its
// renter when Config.OutputRetention is 0.
const DefaultOutputRetention = 7 * 24 * time.Hour

// outputImportTimeout bounds the import of a job's outputs after it
// exits. The GPUs are held meanwhile and the run is not billed for it.
const outputImportTimeout = 15 * time.Minute

// keepOutputs imports the exited job's outputs volume, if its spec has
// one, pinned for the retention window, and returns its CID. It runs on
// a node that is stopping too: the results exist only in the volume,
// which goes with the job.
func (pj *Provider) keepOutputs(al *activeLease, job executor.Job) (string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(pj.bg), outputImportTimeout)
	defer cancel()
	rc, err := job.CopyOutputs(ctx)
	if errors.Is(err, executor.ErrNoOutputs) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer rc.Close()
	if pj.data == nil {
		return "", errors.New("this provider cannot keep outputs")
	}
	began := time.Now()
	root, skipped, err := pj.data.KeepOutputs(ctx, rc, time.Now().Add(pj.retention), al.lease.Renter)
	if err != nil {
		return "", err
	}
	pj.log.Info("job outputs kept", "job", al.lease.JobID, "cid", root, "took", time.Since(began).Round(time.Millisecond),
		"until", time.Now().Add(pj.retention).UTC().Format(time.RFC3339), "skipped", skipped)
	return root.String(), nil
}
