package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"gopkg.in/yaml.v3"
)

// reprovideEvery re-announces every pin in the DHT, whose provider records
// expire after 48 h.
const reprovideEvery = 12 * time.Hour

// startData opens the content-addressed block store (job inputs and
// outputs and the datasets an owner pins, bounded by data.quota_gib).
func (n *Node) startData() error {
	st, err := data.OpenStore(filepath.Join(n.repo.Dir, repo.DataDir), int64(n.cfg.Data.QuotaGiB)<<30)
	if err != nil {
		return err
	}
	n.data = st
	n.onClose(func(context.Context) error { return st.Close() })
	return nil
}

// startExchange serves and fetches blocks with bitswap on the node's host,
// namespaced to its network, with the DHT as the content router. It runs
// once the host is up; its close runs before the store's.
func (n *Node) startExchange() error {
	if err := n.startAccess(); err != nil {
		return err
	}
	x, err := data.NewExchange(n.bg, data.ExchangeConfig{
		Host:           n.host.LibP2P(),
		ProtocolPrefix: n.host.ProtocolID("data"),
		Router:         n.host.DHT(),
		Store:          n.data,
		Log:            n.log,
		// Private by default: only what is public or granted to the
		// asking peer is served (node_access.go).
		Allow: n.access.Allow,
		// A peer that sends wrong bytes is cut off and held off for a
		// while (p2p's disconnect hold), so that it cannot keep a fetch
		// busy with garbage.
		OnBadPeer: func(p peer.ID) {
			n.log.Warn("data: disconnecting a peer that sent blocks whose bytes match no CID asked for", "peer", p)
			n.tasks.Go(func() { _ = n.host.Disconnect(p) })
		},
	})
	if err != nil {
		return err
	}
	n.exchange = x
	data.ServeAccess(n.host.LibP2P(), n.host.ProtocolID("data"), n.access, func(ctx context.Context, c cid.Cid) bool {
		has, _ := n.data.Blockstore().Has(ctx, c)
		return has
	})
	n.onClose(func(context.Context) error { return x.Close() })
	n.tasks.Go(n.reprovideLoop)
	n.tasks.Go(n.retentionLoop)
	return nil
}

// retentionEvery is how often lapsed pins (outputs past their retention
// window) are dropped and their blocks collected.
const retentionEvery = 10 * time.Minute

// retentionLoop unpins what lapsed and collects it, at the start (a node
// that was down past a window) and then every retentionEvery.
func (n *Node) retentionLoop() {
	t := time.NewTicker(retentionEvery)
	defer t.Stop()
	for {
		if lapsed, err := n.data.ExpirePins(n.bg, time.Now()); err != nil {
			n.log.Warn("data: expiring pins failed", "err", err)
		} else if len(lapsed) > 0 {
			r, err := n.data.GC(n.bg)
			n.log.Info("data: outputs past their retention deleted", "pins", len(lapsed), "freed_bytes", r.Freed, "err", err)
		}
		select {
		case <-n.bg.Done():
			return
		case <-t.C:
		}
	}
}

// fetchData brings the DAG under c into the store, from peers where it
// is not all here, and pins it; lim, unless zero, bounds the fetch
// (data.FetchWithin).
//
// sources, when given, are the peers that hold it (a job's provider): a
// refusal by all of them ends the fetch at once (data.FetchFrom). What is
// fetched is private here unless public says otherwise.
func (n *Node) fetchData(ctx context.Context, c cid.Cid, timeout time.Duration, public bool, lim data.FetchLimits, sources ...peer.ID) (DataFetchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := &fetchProgress{since: time.Now()}
	n.fetching.Store(c.String(), p)
	defer n.fetching.CompareAndDelete(c.String(), p)
	progress := func(fp data.FetchProgress) {
		p.blocks.Store(int64(fp.Blocks))
		p.bytes.Store(fp.Bytes)
	}
	var r data.FetchResult
	var err error
	if lim.MaxBytes > 0 {
		r, err = n.exchange.FetchWithin(ctx, c, sources, lim, progress)
	} else {
		r, err = n.exchange.FetchFrom(ctx, c, sources, progress)
	}
	if err != nil {
		return DataFetchResult{}, dataError(err)
	}
	size, err := n.data.Size(ctx, c)
	if err != nil {
		return DataFetchResult{}, err
	}
	if public {
		if err := n.publishData(ctx, c); err != nil {
			return DataFetchResult{}, err
		}
	}
	return DataFetchResult{CID: c.String(), Bytes: size, Blocks: r.Blocks, Fetched: r.Peers > 0, Public: n.access.IsPublic(c)}, nil
}

// provideData announces c in the DHT in the background: a DHT put takes
// seconds and may fail on a small network, neither of which is the
// caller's concern (the next reprovide tries again).
func (n *Node) provideData(c cid.Cid) {
	n.tasks.Go(func() {
		ctx, cancel := context.WithTimeout(n.bg, time.Minute)
		defer cancel()
		if err := n.exchange.Provide(ctx, c); err != nil && n.bg.Err() == nil {
			n.log.Debug("data: provide failed; retried at the next reprovide", "cid", c, "err", err)
		}
	})
}

func (n *Node) reprovideLoop() {
	t := time.NewTicker(reprovideEvery)
	defer t.Stop()
	for {
		pins, _ := n.data.Pins(n.bg) // an error here is retried at the next tick
		for _, c := range pins {     // one at a time: a reprovide is background work
			if !n.access.IsPublic(c) {
				continue // private: announced nowhere
			}
			ctx, cancel := context.WithTimeout(n.bg, time.Minute)
			err := n.exchange.Provide(ctx, c)
			cancel()
			if err != nil && n.bg.Err() == nil {
				n.log.Debug("data: reprovide failed", "cid", c, "err", err)
			}
		}
		select {
		case <-n.bg.Done():
			return
		case <-t.C:
		}
	}
}

// resolveInputs imports the inputs a spec names by a path on this
// machine (src) into the store, pins and announces them, and returns the
// spec with their CIDs in place of the paths: providers are sent CIDs
// only. A spec that does not parse is returned as it is, for submit to
// report with its line; one without src inputs is returned unchanged.
func (n *Node) resolveInputs(ctx context.Context, specYAML []byte) ([]byte, error) {
	spec, err := auction.ParseJobSpec(specYAML)
	if err != nil || !spec.Unresolved() {
		return specYAML, nil
	}
	for i := range spec.Inputs {
		in := &spec.Inputs[i]
		if in.Src == "" {
			continue
		}
		field := fmt.Sprintf("inputs[%d].src", i)
		if !filepath.IsAbs(in.Src) {
			return nil, fmt.Errorf("%w: %s %q: relative to what? Over the API give an absolute path (gleaner job run makes it relative to the spec file)", auction.ErrBadJobSpec, field, in.Src)
		}
		st, err := os.Stat(in.Src)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", auction.ErrBadJobSpec, field, err)
		}
		// A directory's entries appear at the input's path; a single file
		// appears under its own name there (a volume is a directory).
		var c cid.Cid
		if st.IsDir() {
			c, err = n.data.Add(ctx, in.Src)
		} else {
			c, err = n.data.AddWrapped(ctx, in.Src)
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", field, in.Src, err)
		}
		// Private: served only to the provider of a lease of this job,
		// for the lease (renting grants it), and announced nowhere.
		n.log.Info("job input imported", "src", in.Src, "cid", c)
		in.CID, in.Src = c.String(), ""
	}
	return yaml.Marshal(spec)
}

// nodeData gives the provider's job runner (node/providing) the node's
// exchange and store: a job's inputs are fetched, kept pinned (a cache
// that later jobs and other nodes use, announced in the DHT) and streamed
// into its volumes; its outputs are imported, pinned for the retention
// window and announced, so that the renter can fetch them.
type nodeData struct{ n *Node }

// Fetch gets a job's input, at most max bytes of blocks (FetchWithin).
// It stays private here: the renter's data, kept as a cache for its
// later jobs, served to nobody and announced nowhere. A renter that
// refuses it (the lease's grant ended) ends the fetch at once with
// data.ErrRefused.
func (d nodeData) Fetch(ctx context.Context, c cid.Cid, max int64) (int64, error) {
	p := &fetchProgress{since: time.Now()}
	d.n.fetching.Store(c.String(), p) // data_fetching shows it, as it does data_pin's
	defer d.n.fetching.CompareAndDelete(c.String(), p)
	r, err := d.n.exchange.FetchWithin(ctx, c, nil, data.FetchLimits{MaxBytes: max}, func(fp data.FetchProgress) {
		p.blocks.Store(int64(fp.Blocks))
		p.bytes.Store(fp.Bytes)
	})
	return r.Bytes, err
}

func (d nodeData) Expand(ctx context.Context, c cid.Cid, max int64) (data.DAGSize, error) {
	return d.n.data.Expand(ctx, c, max)
}

func (d nodeData) Pinned(ctx context.Context, c cid.Cid) (bool, error) {
	return d.n.data.Pinned(ctx, c)
}

func (d nodeData) Unpin(ctx context.Context, c cid.Cid) error { return d.n.data.Unpin(ctx, c) }

func (d nodeData) Tar(ctx context.Context, c cid.Cid, w io.Writer, max int64) error {
	return data.WriteTar(ctx, d.n.data.DAG(), c, w, data.ExportLimits{MaxBytes: max, MaxEntries: maxInputEntries})
}

// maxInputEntries bounds the files and directories of one input: a
// million is more than any dataset laid out sensibly has.
const maxInputEntries = 1 << 20

// KeepOutputs seals a job's outputs to its renter (data.AddSealedTarUntil),
// refusing (data.ErrTooLarge) a stream whose files pass max bytes, and
// grants the renter, and only it, their ciphertext until until.
func (d nodeData) KeepOutputs(ctx context.Context, r io.Reader, until time.Time, renter string, max int64) (cid.Cid, []string, error) {
	p, err := peer.Decode(renter)
	if err != nil {
		return cid.Undef, nil, fmt.Errorf("renter %q: %w", renter, err)
	}
	to, err := data.PeerRecipient(p)
	if err != nil {
		return cid.Undef, nil, err
	}
	res, err := d.n.data.AddSealedTarUntil(ctx, r, data.ExportLimits{MaxBytes: max, MaxEntries: maxInputEntries}, to, until)
	if err != nil {
		return cid.Undef, nil, err
	}
	if err := d.n.grantData(p, []cid.Cid{res.Root}, until, ""); err != nil {
		return cid.Undef, nil, err
	}
	return res.Root, res.Skipped, nil
}

// freeDisk is the provider's view of its free disk for a job's inputs
// (providing.Config.FreeDisk): where the block store is, and where the
// executor writes input volumes; the store's where the executor cannot
// tell (a Docker engine on another machine).
func (n *Node) freeDisk(exec executor.Executor) func(context.Context) (int64, int64, error) {
	return func(ctx context.Context) (int64, int64, error) {
		store, err := executor.DiskFree(filepath.Join(n.repo.Dir, repo.DataDir))
		if err != nil {
			return 0, 0, err
		}
		vols := store
		if sp, ok := exec.(executor.InputSpacer); ok {
			free, known, err := sp.InputSpace(ctx)
			if err != nil {
				return 0, 0, err
			}
			if known {
				vols = free
			}
		}
		return store, vols, nil
	}
}

// fetchProgress is one fetch in flight, for data_fetching.
type fetchProgress struct {
	since         time.Time
	blocks, bytes atomic.Int64
}

// heldDatasets are the public DAGs this node keeps for good, for its
// offer. Private data (the owner's, the inputs it fetched for jobs) is
// announced nowhere; renters' outputs,
// whose pins lapse, are nobody else's data and are left out.
func (n *Node) heldDatasets() []string {
	pins, err := n.data.LastingPins(n.bg)
	if err != nil {
		return nil
	}
	out := []string{}
	for _, c := range pins {
		if n.access.IsPublic(c) { // private data is nobody's business
			out = append(out, c.String())
		}
	}
	return out
}
