package renting

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
)

// A job record written by a 0.1 node (float credits under price, paid,
// bid and clearing_price) loads: the node starts, the record keeps its
// state, and no float amount is read as micro-credits.
func TestOldJobRecordsLoadWithoutTheirFloatAmounts(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	old := json.RawMessage(`{"id":"old","name":"old","state":"completed","spec":"","price":0.45,"paid":2,"gpus":1,` +
		`"explain":{"considered":1,"funnel":[],"quotes":[{"provider":"p","bid":0.5}],"winner":"p","clearing_price":1}}`)
	if err := st.Update(func(tx *store.Tx) error { return tx.Put(store.BucketJobs, "old", old) }); err != nil {
		t.Fatal(err)
	}
	r, err := New(Deps{Bg: context.Background(), Store: st, Log: quietLog})
	if err != nil {
		t.Fatalf("a 0.1 job record stops the node from starting: %v", err)
	}
	j, err := r.Get("old")
	if err != nil {
		t.Fatal(err)
	}
	if j.State != StateCompleted || j.Price != 0 || j.Paid != 0 || j.Explain.ClearingPrice != 0 || j.Explain.Quotes[0].Bid != 0 {
		t.Fatalf("old record read as %+v, explain %+v", j, j.Explain)
	}
	// What this node writes is integers, under the new keys.
	j.Price, j.Paid, j.Explain.ClearingPrice, j.Explain.Quotes[0].Bid = 450_000, 2_000_000, 1_000_000, 500_000
	b, _ := json.Marshal(j)
	for _, want := range []string{`"lease_price":450000`, `"paid_total":2000000`, `"clearing":1000000`, `"bid_price":500000`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("record %s lacks %s", b, want)
		}
	}
}
