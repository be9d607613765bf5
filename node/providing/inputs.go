package providing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/ipfs/go-cid"
)

// Data brings a job's input DAGs to this node and reads them out, and
// keeps its outputs: the node's block exchange and store (node/data).
type Data interface {
	// Fetch gets the whole DAG under c into the store, checking every
	// block against its CID, and pins it; it returns the bytes of its
	// distinct blocks. It stops (data.FetchWithin) once those pass max
	// bytes (a *data.SizeError), or the DAG passes data.MaxFolderDepth
	// (data.ErrTooDeep) or data.MaxEntries (data.ErrTooLarge).
	Fetch(ctx context.Context, c cid.Cid, max int64) (int64, error)
	// Expand measures what writing the DAG under c, all in the store,
	// out costs, a block counted each time it is linked; it stops past
	// max bytes (a *data.SizeError), and past the depth and entry bounds.
	Expand(ctx context.Context, c cid.Cid, max int64) (data.DAGSize, error)
	// Pinned says whether c is pinned; Unpin drops its pin.
	Pinned(ctx context.Context, c cid.Cid) (bool, error)
	Unpin(ctx context.Context, c cid.Cid) error
	// Tar writes the DAG under c as a tar stream, bounded by max bytes.
	Tar(ctx context.Context, c cid.Cid, w io.Writer, max int64) error
	// KeepOutputs keeps a tar stream of a job's results, sealed to the
	// lease's renter (a peer ID) so that only it can read them and served
	// to it alone, pinned until until, and returns the CID and the
	// entries it skipped (links, devices). It refuses (data.ErrTooLarge) a
	// stream whose files pass max bytes.
	KeepOutputs(ctx context.Context, r io.Reader, until time.Time, renter string, max int64) (root cid.Cid, skipped []string, err error)
}

// DefaultInputFetchTimeout bounds the fetch of a job's inputs before it
// starts (Config.InputFetchTimeout): the lease's clock runs meanwhile
// (unbilled, but the window is the renter's), and an input nobody serves
// must fail the start within minutes, not at the lease's end.
const DefaultInputFetchTimeout = 20 * time.Minute

// DefaultMaxJobInput bounds a job's inputs, in all, as written into its
// volumes, when Config.MaxJobInput is 0 (data.max_job_input_gib).
const DefaultMaxJobInput = 20 << 30

// Fetching is part of the deal. The fetch of a job's inputs is not
// billed (the meter starts with the container), so it is bounded by what
// the renter bought: it must end within inputShare of the lease's
// duration after the lease's start (at least MinInputFetch), by the
// lease's end, and within the owner's data.input_fetch_timeout_s,
// whichever comes first; and a job whose inputs pass the owner's
// data.max_job_input_gib, or would not fit the free disk less
// data.disk_reserve_gib, is refused. A renter can thus make a provider
// fetch at most a quarter of the time it leased, and at most the bytes
// the owner allows, per award; what the fetch brought stays in the store
// as a cache only when the job was not refused.
const (
	// inputShare is the part of the lease's duration its inputs' fetch
	// may take.
	inputShare = 4
	// MinInputFetch is the least time a fetch is given, however short
	// the lease: enough to find a provider of the blocks in the DHT.
	MinInputFetch = 2 * time.Minute
)

// errNoInputs: a job with inputs on a node that cannot fetch any.
var errNoInputs = errors.New("this provider cannot fetch job inputs")

// inputDeadline is when the fetch of l's inputs must end, from now, and
// why it ends then (the cause a fetch that runs past it reports).
func (pj *Provider) inputDeadline(l *auction.Lease, now time.Time) (time.Time, error) {
	deadline := now.Add(pj.inputTimeout)
	why := fmt.Errorf("took longer than this provider's data.input_fetch_timeout_s (%v)", pj.inputTimeout)
	length := time.Duration(l.End-l.Start) * time.Second
	share := max(length/inputShare, MinInputFetch)
	if d := time.Unix(l.Start, 0).Add(share); d.Before(deadline) {
		deadline = d
		why = fmt.Errorf("took longer than its share of the lease: the fetch is not billed, so it may take a quarter of the lease's %v (at least %v) from its start",
			length, MinInputFetch)
	}
	if d := time.Unix(l.End, 0); d.Before(deadline) {
		deadline, why = d, errors.New("ran to the lease's end")
	}
	return deadline, why
}

// errInputsRefused wraps the refusals of a job whose inputs pass this
// provider's bounds: its limit, its free disk, the depth and entry bounds.
var errInputsRefused = errors.New("refused")

// fetchInputs gets every input of spec into the store before the job
// starts, and fills es.Inputs with their mounts, each bounded by its
// size as measured on its blocks. It refuses (errInputsRefused) a job
// whose inputs, in all, pass pj.maxInput or the free disk less the
// reserve, counting each input as blocks arrive (data.FetchWithin) and
// then as written out (data.Expand, a block as often as it is linked),
// before any volume is written; the inputs this job's fetch pinned are
// unpinned then. The fetch is not billed: the meter starts when the
// container runs. It ends early when the renter cancels or ctx ends,
// and at inputDeadline.
//
// Nothing of this is kept across a restart, nor needs to be: a lease
// whose inputs were being fetched is held again at the next start
// (Restore), its renter starts it again, and this runs again from the
// beginning, over the blocks the store kept, which the fetch counts as
// it finds them (data.FetchWithin) and Expand measures like any others.
func (pj *Provider) fetchInputs(ctx context.Context, al *activeLease, spec *auction.JobSpec, es *executor.Spec, send func(wire.Event) error) (err error) {
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
	deadline, why := pj.inputDeadline(al.lease, time.Now())
	ctx, cancel := context.WithDeadlineCause(ctx, deadline, why)
	defer cancel()
	go func() {
		select {
		case <-al.cancelled:
			cancel()
		case <-ctx.Done():
		}
	}()
	_ = send(wire.Event{Type: wire.EventStatus, Status: wire.StatusFetching, Error: fmt.Sprintf("%d input(s)", len(spec.Inputs))})
	var mine []cid.Cid // pinned by this fetch: unpinned if the job is refused
	defer func() {
		if !errors.Is(err, errInputsRefused) {
			return
		}
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer ucancel()
		for _, c := range mine {
			if uerr := pj.data.Unpin(uctx, c); uerr != nil {
				pj.log.Warn("input of a refused job not unpinned", "job", al.lease.JobID, "cid", c, "err", uerr)
			}
		}
	}()
	left := pj.maxInput // of the job's bound, for the inputs not yet counted
	var total int64
	for i, in := range spec.Inputs {
		c, err := cid.Decode(in.CID)
		if err != nil {
			return fmt.Errorf("inputs[%d]: %v", i, err)
		}
		name := fmt.Sprintf("inputs[%d] %s", i, in.CID)
		// What the fetch may bring: the job's bound less the inputs
		// before, or the free disk where the store is, less the reserve.
		fetchMax, overDisk, storeFree := left, false, int64(0)
		if pj.freeDisk != nil {
			store, _, err := pj.freeDisk(ctx)
			if err != nil {
				return fmt.Errorf("%s: the free disk space: %w", name, err)
			}
			if room := store - pj.reserve; room < fetchMax {
				fetchMax, overDisk, storeFree = room, true, store
			}
		}
		overFetch := func(counted int64) error {
			if overDisk {
				return fmt.Errorf("%s: %w: it does not fit this provider's disk: %s free where its block store is, of which data.disk_reserve_gib keeps %s free (%s of it counted)",
					name, errInputsRefused, sizeText(max(storeFree, 0)), sizeText(pj.reserve), sizeText(counted))
			}
			return pj.overLimit(name, total+counted, "the blocks that arrived")
		}
		if fetchMax <= 0 {
			return overFetch(0)
		}
		was, _ := pj.data.Pinned(ctx, c)
		began := time.Now()
		size, err := pj.data.Fetch(ctx, c, fetchMax)
		if !was {
			if now, _ := pj.data.Pinned(context.WithoutCancel(ctx), c); now {
				mine = append(mine, c)
			}
		}
		var se *data.SizeError
		switch {
		case errors.As(err, &se):
			return overFetch(se.Bytes)
		case errors.Is(err, data.ErrTooDeep), errors.Is(err, data.ErrTooLarge):
			return fmt.Errorf("%s: %w: %w", name, errInputsRefused, err)
		case err != nil && ctx.Err() != nil && context.Cause(ctx) == why:
			return fmt.Errorf("%s: the fetch %w: %w", name, why, err)
		case err != nil:
			return fmt.Errorf("%s: %w", name, err)
		}
		sz, err := pj.data.Expand(ctx, c, left)
		switch {
		case errors.As(err, &se):
			return pj.overLimit(name, total+se.Bytes, "every block as often as it is linked")
		case errors.Is(err, data.ErrTooDeep), errors.Is(err, data.ErrTooLarge):
			return fmt.Errorf("%s: %w: %w", name, errInputsRefused, err)
		case err != nil:
			return fmt.Errorf("%s: %w", name, err)
		}
		left -= sz.Bytes
		total += sz.Bytes
		pj.log.Info("job input fetched", "job", al.lease.JobID, "cid", in.CID, "bytes", size, "written_bytes", sz.Bytes, "entries", sz.Entries,
			"took", time.Since(began).Round(time.Millisecond))
		bound := max(sz.Bytes, 1)
		es.Inputs = append(es.Inputs, executor.Input{
			Target: in.Path,
			// The bound of the volume and of the stream that fills it (a
			// second guard: a stream that passes it fails the fill).
			Bytes: bound,
			// The store holds the DAG from here on (Fetch pinned it).
			Tar: func(ctx context.Context, w io.Writer) error { return pj.data.Tar(ctx, c, w, bound) },
		})
	}
	// The volumes are written where the executor keeps them, which may be
	// the disk the fetch just filled: asked now, after it.
	if pj.freeDisk != nil {
		_, vols, err := pj.freeDisk(ctx)
		if err != nil {
			return fmt.Errorf("the free disk space: %w", err)
		}
		if total > vols-pj.reserve {
			return fmt.Errorf("%w: they take %s once written, and this provider's disk has %s free where the input volumes go, of which data.disk_reserve_gib keeps %s free",
				errInputsRefused, sizeText(total), sizeText(max(vols, 0)), sizeText(pj.reserve))
		}
	}
	return nil
}

// overLimit is the refusal of a job whose inputs passed pj.maxInput, with
// counted bytes of them counted (how) when the count stopped.
func (pj *Provider) overLimit(name string, counted int64, how string) error {
	return fmt.Errorf("%s: %w: over this provider's limit for one job's inputs, data.max_job_input_gib (%s): %s counted when it stopped (the inputs before, and of this one %s)",
		name, errInputsRefused, sizeText(pj.maxInput), sizeText(counted), how)
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
// which goes with the job. Outputs whose files pass the spec's max_size
// (the volume's size, data.OutputLimits) are refused, and not
// published: the renter's fetch would refuse them too. A job adopted
// after a restart has no spec here: its volume's quota bounds it.
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
	bound := int64(auction.MaxOutputBytes)
	if al.outputMax > 0 {
		bound, _ = data.OutputLimits(al.outputMax)
	}
	began := time.Now()
	root, skipped, err := pj.data.KeepOutputs(ctx, rc, time.Now().Add(pj.retention), al.lease.Renter, bound)
	if errors.Is(err, data.ErrTooLarge) && al.outputMax > 0 {
		return "", fmt.Errorf("%w: over the spec's outputs.max_size %s (%v)", ErrOutputsTooLarge, auction.FormatSize(al.outputMax), err)
	}
	if err != nil {
		return "", err
	}
	pj.log.Info("job outputs kept", "job", al.lease.JobID, "cid", root, "took", time.Since(began).Round(time.Millisecond),
		"until", time.Now().Add(pj.retention).UTC().Format(time.RFC3339), "skipped", skipped)
	return root.String(), nil
}

// OutputsNotKept begins the note of an exit event whose job's outputs
// were not kept.
const OutputsNotKept = "the outputs could not be kept: "

// ErrOutputsTooLarge: the job's outputs pass its spec's outputs.max_size,
// and were not kept.
var ErrOutputsTooLarge = errors.New("outputs refused")

// sizeText is n bytes for a person: exact where it is a whole number of
// MiB (as config and specs give sizes), else to a tenth.
func sizeText(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return auction.FormatSize(n)
	case n >= 1<<30:
		return fmt.Sprintf("%.2fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
