package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/ipfs/go-cid"
)

// Application error codes of the data namespace (docs/RPC.md).
const (
	CodeDataQuota      = -32040 // the block store's quota (data.quota_gib) would be passed
	CodeDataUnservable = -32041 // no peer served a block of the DAG in time
	CodeDataNotPinned  = -32042 // data_rm of a CID that is not pinned here
	CodeDataRefused    = -32043 // the DAG is unsafe to write out (a name like .., or larger or deeper than the limits)
	CodeDataPrivate    = -32044 // every peer asked refused to serve it to this node: private, or held by none
)

var (
	errDataQuota      = &rpc.Error{Code: CodeDataQuota, Message: "the block store's quota would be passed"}
	errDataUnservable = &rpc.Error{Code: CodeDataUnservable, Message: "no peer served the data in time"}
	errDataNotPinned  = &rpc.Error{Code: CodeDataNotPinned, Message: "not pinned on this node"}
	errDataRefused    = &rpc.Error{Code: CodeDataRefused, Message: "refused to write the DAG out"}
	errDataPrivate    = &rpc.Error{Code: CodeDataPrivate, Message: "the peers asked refuse to serve it to this node: it is private, or no peer holds it"}
)

// DefaultFetchTimeout bounds data_pin and data_get when the call gives no
// timeout: long enough for a large dataset from a slow peer, short enough
// that a CID nobody serves fails within minutes rather than never.
const DefaultFetchTimeout = 10 * time.Minute

// DataPathParams name a file or directory on this node's machine.
type DataPathParams struct {
	Path string `json:"path"`
	// Public serves the data to any peer and announces it in the DHT;
	// without it the data is private to this node (docs/DATA.md).
	Public bool `json:"public,omitempty"`
}

// Validate wants an absolute path: the daemon's working directory is not
// the caller's, so a relative one would name some other file.
func (p DataPathParams) Validate() error {
	if p.Path == "" {
		return errors.New("path: give the file or directory to add")
	}
	if !filepath.IsAbs(p.Path) {
		return fmt.Errorf("path %q: must be absolute (the CLI makes it so)", p.Path)
	}
	return nil
}

// DataCIDParams name one DAG; timeout_s bounds a fetch (default 600).
type DataCIDParams struct {
	CID      string `json:"cid"`
	TimeoutS int    `json:"timeout_s,omitempty"`
	// Public (data_pin, data_get): serve what is fetched to any peer.
	Public bool `json:"public,omitempty"`
}

// Validate checks the CID's syntax and the timeout's range.
func (p DataCIDParams) Validate() error {
	if _, err := parseDataCID(p.CID); err != nil {
		return err
	}
	return validFetchTimeout(p.TimeoutS)
}

// validFetchTimeout bounds timeout_s of every call that fetches a DAG.
func validFetchTimeout(s int) error {
	if s < 0 || s > 86400 {
		return fmt.Errorf("timeout_s %d: use 1 to 86400, or leave it out for %d", s, int(DefaultFetchTimeout.Seconds()))
	}
	return nil
}

// validNewDir wants an absolute path for a get to create.
func validNewDir(dir string) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("dir %q: give an absolute path that does not exist yet (the CLI makes it absolute)", dir)
	}
	return nil
}

func (p DataCIDParams) timeout() time.Duration {
	if p.TimeoutS == 0 {
		return DefaultFetchTimeout
	}
	return time.Duration(p.TimeoutS) * time.Second
}

// DataGetParams name a DAG and a directory entry to write it to.
type DataGetParams struct {
	DataCIDParams
	Dir string `json:"dir"`
}

// Validate wants an absolute destination that does not exist yet, in a
// directory that does: get never merges into or overwrites what is there.
func (p DataGetParams) Validate() error {
	if err := p.DataCIDParams.Validate(); err != nil {
		return err
	}
	return validNewDir(p.Dir)
}

func parseDataCID(s string) (cid.Cid, error) {
	if s == "" {
		return cid.Undef, errors.New("cid: give a content ID, for example bafybei... (from gleaner data add)")
	}
	c, err := cid.Decode(s)
	if err != nil {
		return cid.Undef, fmt.Errorf("cid %q is not a content ID: %v", s, err)
	}
	return c, nil
}

// DataPin is one pinned DAG.
type DataPin struct {
	CID   string `json:"cid"`
	Bytes int64  `json:"bytes"` // the DAG's size as stored and sent: every block it links
	// Public: served to any peer; false: private to this node (served only
	// to peers it granted it to, such as a lease's provider).
	Public bool `json:"public"`
}

// DataListResult is data_ls's result.
type DataListResult struct {
	UsedBytes  int64     `json:"used_bytes"`
	QuotaBytes int64     `json:"quota_bytes"`
	Pins       []DataPin `json:"pins"`
	// RefusedWants counts the blocks peers asked for since the start that
	// were neither public nor granted to them, answered as not here.
	RefusedWants int64 `json:"refused_wants"`
}

// DataFetchResult is data_add's, data_pin's and data_get's result.
type DataFetchResult struct {
	CID     string `json:"cid"`
	Bytes   int64  `json:"bytes"`
	Blocks  int    `json:"blocks,omitempty"`
	Fetched bool   `json:"fetched"` // some blocks came from peers
	Path    string `json:"path,omitempty"`
	Public  bool   `json:"public"` // served to any peer (else private to this node)
	// Sealed: job_fetch opened outputs sealed to this node (docs/DATA.md);
	// CID is then the ciphertext's, as the provider's settlement signs it.
	Sealed bool `json:"sealed,omitempty"`
	Files  int  `json:"files,omitempty"`
}

// DataGCResult is data_gc's and data_rm's result.
type DataGCResult struct {
	CID           string `json:"cid,omitempty"`
	RemovedBlocks int    `json:"removed_blocks"`
	FreedBytes    int64  `json:"freed_bytes"`
	UsedBytes     int64  `json:"used_bytes"`
}

type dataAPI struct{ n *Node }

func registerDataAPI(s *rpc.Server, n *Node) {
	a := dataAPI{n}
	rpc.Register(s, "data_add", rpc.MethodDoc{
		Summary: "Import a file or directory on this node's machine into the block store and pin it.",
		Description: "The CID is the one `ipfs add --cid-version=1` gives for the same files. path must be absolute. " +
			"The data is private unless public is true: served only to the peers this node grants it to (a lease's provider, for the lease).",
		ParamNames: []string{"path", "public"},
		Errors:     []*rpc.Error{errDataQuota},
	}, a.Add)
	rpc.Register(s, "data_pin", rpc.MethodDoc{
		Summary: "Fetch a DAG from the peers that have it (every block verified against its CID) and pin it.",
		Description: "Blocks already here are not fetched again. timeout_s defaults to 600. public: serve it to any peer (else it is private here); " +
			"data_pin of a CID already here with public true publishes it.",
		ParamNames: []string{"cid", "timeout_s", "public"},
		Errors:     []*rpc.Error{errDataQuota, errDataUnservable, errDataPrivate},
	}, a.Pin)
	rpc.Register(s, "data_ls", rpc.MethodDoc{Summary: "The pinned DAGs, and the store's use and quota."}, a.List)
	rpc.Register(s, "data_rm", rpc.MethodDoc{
		Summary:    "Unpin a DAG and free the blocks no other pin holds.",
		ParamNames: []string{"cid"},
		Errors:     []*rpc.Error{errDataNotPinned},
	}, a.Remove)
	rpc.Register(s, "data_gc", rpc.MethodDoc{Summary: "Free every block that no pin holds."}, a.GC)
	rpc.Register(s, "data_fetching", rpc.MethodDoc{Summary: "The fetches in flight (data_pin, data_get, job_fetch, a provider's job inputs) and how far each has come."}, a.Fetching)
	rpc.Register(s, "data_get", rpc.MethodDoc{
		Summary:     "Fetch a DAG (as data_pin does) and write it out as files at dir, which must not exist yet.",
		Description: "Names such as .. or containing / are refused, and nothing is written outside dir.",
		ParamNames:  []string{"cid", "dir", "timeout_s", "public"},
		Errors:      []*rpc.Error{errDataQuota, errDataUnservable, errDataRefused, errDataPrivate},
	}, a.Get)
}

func (a dataAPI) Add(ctx context.Context, p DataPathParams) (DataFetchResult, error) {
	if _, err := os.Stat(p.Path); err != nil {
		return DataFetchResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: fmt.Sprintf("path: %v", err)}
	}
	c, err := a.n.data.Add(ctx, p.Path)
	if err != nil {
		return DataFetchResult{}, dataError(err)
	}
	size, err := a.n.data.Size(ctx, c)
	if err != nil {
		return DataFetchResult{}, err
	}
	if p.Public {
		if err := a.n.publishData(ctx, c); err != nil {
			return DataFetchResult{}, dataError(err)
		}
	}
	return DataFetchResult{CID: c.String(), Bytes: size, Public: a.n.access.IsPublic(c)}, nil
}

func (a dataAPI) Pin(ctx context.Context, p DataCIDParams) (DataFetchResult, error) {
	c, _ := parseDataCID(p.CID)
	return a.n.fetchData(ctx, c, p.timeout(), p.Public, data.FetchLimits{})
}

func (a dataAPI) List(ctx context.Context, _ struct{}) (DataListResult, error) {
	pins, err := a.n.data.Pins(ctx)
	if err != nil {
		return DataListResult{}, err
	}
	res := DataListResult{UsedBytes: a.n.data.Used(), QuotaBytes: a.n.data.Quota(), Pins: []DataPin{}, RefusedWants: a.n.access.Refused()}
	for _, c := range pins {
		// A pin whose root is not here yet (a fetch cut short) lists with
		// size 0 rather than hiding the pin.
		size, _ := a.n.data.Size(ctx, c)
		res.Pins = append(res.Pins, DataPin{CID: c.String(), Bytes: size, Public: a.n.access.IsPublic(c)})
	}
	return res, nil
}

func (a dataAPI) Remove(ctx context.Context, p DataCIDParams) (DataGCResult, error) {
	c, _ := parseDataCID(p.CID)
	pinned, err := a.n.data.Pinned(ctx, c)
	if err != nil {
		return DataGCResult{}, err
	}
	if !pinned {
		return DataGCResult{}, &rpc.Error{Code: CodeDataNotPinned, Message: p.CID + " is not pinned on this node (gleaner data ls lists what is)"}
	}
	if err := a.n.data.Unpin(ctx, c); err != nil {
		return DataGCResult{}, err
	}
	if err := a.n.unpublishData(c); err != nil {
		return DataGCResult{}, err
	}
	res, err := a.GC(ctx, struct{}{})
	res.CID = c.String()
	return res, err
}

func (a dataAPI) GC(ctx context.Context, _ struct{}) (DataGCResult, error) {
	r, err := a.n.data.GC(ctx)
	if err != nil {
		return DataGCResult{}, err
	}
	return DataGCResult{RemovedBlocks: r.Removed, FreedBytes: r.Freed, UsedBytes: a.n.data.Used()}, nil
}

func (a dataAPI) Get(ctx context.Context, p DataGetParams) (DataFetchResult, error) {
	if err := checkNewDir(p.Dir); err != nil {
		return DataFetchResult{}, err
	}
	c, _ := parseDataCID(p.CID)
	res, err := a.n.fetchData(ctx, c, p.timeout(), p.Public, data.FetchLimits{})
	if err != nil {
		return res, err
	}
	// The store's quota bounds what a DAG may write out: no more than it
	// could hold, however many times its blocks are linked.
	if err := a.n.writeOut(ctx, c, p.Dir, a.n.data.Quota(), a.n.data.Quota()); err != nil {
		return res, dataError(err)
	}
	res.Path = p.Dir
	return res, nil
}

// checkNewDir refuses a destination that exists, or whose parent is not
// a directory: get never merges into or overwrites what is there.
func checkNewDir(dir string) error {
	if _, err := os.Lstat(dir); err == nil {
		return &rpc.Error{Code: rpc.CodeInvalidParams, Message: fmt.Sprintf("dir %s exists already; give a new name (get never overwrites)", dir)}
	}
	if st, err := os.Stat(filepath.Dir(dir)); err != nil || !st.IsDir() {
		return &rpc.Error{Code: rpc.CodeInvalidParams, Message: fmt.Sprintf("dir %s: its parent is not a directory", dir)}
	}
	return nil
}

// writeOut writes the DAG under c, which is in the store, as files at
// dir: first measured on its blocks (data.Expand: maxBlocks bytes, a
// block counted as often as linked, and the depth and entry bounds), so
// that a DAG over them writes nothing at all, then exported with files
// bytes of file data at most.
func (n *Node) writeOut(ctx context.Context, c cid.Cid, dir string, maxBlocks, files int64) error {
	if _, err := n.data.Expand(ctx, c, maxBlocks); err != nil {
		return err
	}
	return data.Export(ctx, n.data.DAG(), c, dir, data.ExportLimits{MaxBytes: files, MaxEntries: min(maxInputEntries, data.MaxEntries)})
}

// dataError gives the store's and exchange's errors their codes.
func dataError(err error) error {
	switch {
	case errors.Is(err, auction.ErrBadJobSpec):
		return &rpc.Error{Code: renting.CodeBadJobSpec, Message: err.Error()}
	case errors.Is(err, data.ErrQuota):
		return &rpc.Error{Code: CodeDataQuota, Message: err.Error() + " (raise data.quota_gib in config.toml, or free space with gleaner data rm / gc)"}
	case errors.Is(err, data.ErrRefused):
		return &rpc.Error{Code: CodeDataPrivate, Message: err.Error()}
	case errors.Is(err, data.ErrAccessIndexFull):
		return &rpc.Error{Code: CodeDataQuota, Message: err.Error()}
	case errors.Is(err, data.ErrNotFound):
		return &rpc.Error{Code: CodeDataUnservable, Message: err.Error()}
	case errors.Is(err, data.ErrUnsafePath), errors.Is(err, data.ErrTooLarge), errors.Is(err, data.ErrTooDeep):
		return &rpc.Error{Code: CodeDataRefused, Message: err.Error()}
	}
	return err
}

// DataFetching is one fetch in flight.
type DataFetching struct {
	CID        string    `json:"cid"`
	Blocks     int64     `json:"blocks"`
	Bytes      int64     `json:"bytes"`
	TotalBytes int64     `json:"total_bytes,omitempty"` // the DAG's size, once its root is here
	Since      time.Time `json:"since"`
}

func (a dataAPI) Fetching(ctx context.Context, _ struct{}) ([]DataFetching, error) {
	out := []DataFetching{}
	a.n.fetching.Range(func(k, v any) bool {
		p := v.(*fetchProgress)
		f := DataFetching{CID: k.(string), Blocks: p.blocks.Load(), Bytes: p.bytes.Load(), Since: p.since}
		if c, err := cid.Decode(f.CID); err == nil {
			// The root is the first block fetched; until then the size is unknown.
			if has, _ := a.n.data.Blockstore().Has(ctx, c); has {
				f.TotalBytes, _ = a.n.data.Size(ctx, c)
			}
		}
		out = append(out, f)
		return true
	})
	return out, nil
}
