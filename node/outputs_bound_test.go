package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/data/datatest"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// A provider that lies: its settlement names an outputs CID bigger than
// the job's outputs.max_size allows. The renter's job fetch stops at the
// bound as the blocks arrive (a big DAG), or refuses before writing a
// file (a small DAG that writes out big), naming the job and the size;
// an honest CID within the bound is fetched and written.
func TestJobFetchStopsAtMaxSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	liar := startTestNode(t, ctx, "", Options{})
	rn := startTestNode(t, ctx, "", Options{})
	if err := rn.Host().LibP2P().Connect(ctx, addrInfo(liar.Host())); err != nil {
		t.Fatal(err)
	}
	// 3 MiB of distinct blocks; the bomb, 2 blocks and 500 MiB written
	// out; and 512 KiB, within the bound.
	big := folderOf(t, liar.data, 1, 12)
	bomb, err := datatest.RepeatedFolder(ctx, liar.data.DAG(), 2, 2000, data.ChunkSize)
	if err != nil {
		t.Fatal(err)
	}
	small := folderOf(t, liar.data, 3, 2)
	for _, c := range []cid.Cid{big, bomb, small} {
		if err := liar.data.Pin(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// Served to the renter alone, as a provider serves the outputs it
	// keeps (nodeData.KeepOutputs's grant).
	if err := liar.grantData(rn.Host().LibP2P().ID(), []cid.Cid{big, bomb, small}, time.Now().Add(time.Hour), ""); err != nil {
		t.Fatal(err)
	}
	spec := hostileSpec("outputs", "1s") + "outputs: {path: /outputs, max_size: 1MiB}\n"
	job := func(id string, c cid.Cid) *renting.JobRecord {
		return &renting.JobRecord{ID: id, Spec: spec, Outputs: c.String(), Provider: liar.Host().ID().String(), State: renting.StateCompleted}
	}
	_, blocks := data.OutputLimits(1 << 20)
	for _, tc := range []struct {
		id   string
		c    cid.Cid
		want string
	}{
		{"job-big", big, "bytes of blocks"},
		{"job-bomb", bomb, "once written out"},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		_, err := rn.fetchJobOutputs(ctx, job(tc.id, tc.c), JobFetchParams{ID: tc.id, Dir: dir, TimeoutS: 60})
		t.Logf("%s: %v", tc.id, err)
		var rerr *rpc.Error
		if !errors.As(err, &rerr) || rerr.Code != CodeDataRefused {
			t.Fatalf("%s: %v, want code %d", tc.id, err, CodeDataRefused)
		}
		for _, w := range []string{"job " + tc.id, "outputs.max_size 1MiB", tc.want, "nothing was written"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.id, err, w)
			}
		}
		if _, err := os.Lstat(dir); err == nil {
			t.Errorf("%s: %s was written", tc.id, dir)
		}
		if pinned, _ := rn.data.Pinned(ctx, tc.c); pinned {
			t.Errorf("%s: the refused outputs are pinned", tc.id)
		}
	}
	if used := rn.data.Used(); used > blocks+32*data.ChunkSize {
		t.Errorf("the renter's store holds %d bytes, want the fetch stopped near %d", used, blocks)
	}
	dir := filepath.Join(t.TempDir(), "out")
	res, err := rn.fetchJobOutputs(ctx, job("job-ok", small), JobFetchParams{ID: "job-ok", Dir: dir, TimeoutS: 60})
	if err != nil || res.Path != dir {
		t.Fatalf("outputs within max_size: %+v, %v", res, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "part0001")); err != nil || st.Size() != data.ChunkSize {
		t.Fatalf("the outputs written: %v, %v", st, err)
	}
}

// folderOf puts a folder of n distinct 256 KiB files in s.
func folderOf(t *testing.T, s *data.Store, seed uint64, n int) cid.Cid {
	t.Helper()
	ctx := context.Background()
	var names []string
	var leaves []ipld.Node
	for i := range n {
		l, err := datatest.Leaf(ctx, s.DAG(), seed<<16+uint64(i), data.ChunkSize)
		if err != nil {
			t.Fatal(err)
		}
		names, leaves = append(names, fmt.Sprintf("part%04d", i)), append(leaves, l)
	}
	d, err := datatest.Folder(ctx, s.DAG(), names, leaves)
	if err != nil {
		t.Fatal(err)
	}
	return d.Cid()
}
