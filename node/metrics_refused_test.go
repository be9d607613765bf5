package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/data"
)

// A peer that wants a node's private data is refused, and the node's
// gleaner_data_refused_wants_total counts it, as data ls does.
func TestMetricsCountRefusedWants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := startMetricsNode(t, ctx, "127.0.0.1:0", "", 1)
	asker := startMetricsNode(t, ctx, "", "", 1)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "private.bin"), []byte("not for strangers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := holder.data.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	before, ok := sample(scrape(t, holder.MetricsURL()), "gleaner_data_refused_wants_total")
	if !ok {
		t.Fatal("no gleaner_data_refused_wants_total series")
	}
	if err := asker.Host().LibP2P().Connect(ctx, addrInfo(holder.Host())); err != nil {
		t.Fatal(err)
	}
	_, err = asker.fetchData(ctx, root, 10*time.Second, false, data.FetchLimits{}, holder.Host().ID())
	if err == nil || !strings.Contains(err.Error(), data.ErrRefused.Error()) {
		t.Fatalf("fetch of private data: %v, want refused", err)
	}
	after, _ := sample(scrape(t, holder.MetricsURL()), "gleaner_data_refused_wants_total")
	if after <= before {
		t.Fatalf("refused wants %v after a refused fetch, %v before", after, before)
	}
	if want := float64(holder.access.Refused()); after != want {
		t.Errorf("metric %v, data ls counts %v", after, want)
	}
}
