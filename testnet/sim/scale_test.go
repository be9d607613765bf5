package sim

import (
	"reflect"
	"testing"
)

// TestMarketDeterministicAt10k runs the market twice at issue 33's
// scale, 10,000 providers, for a shortened run (ten minutes at load
// 0.2): the book's views, the renters' rounds and the providers'
// publishes interleave across thousands of coroutines there as they do
// not at test sizes, and the same seed must still give the same run.
func TestMarketDeterministicAt10k(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 providers: seconds per run")
	}
	o := DefaultOptions()
	o.TracesDir = tracesDir(t)
	o.Supply.Providers = 10000
	o.Days = 600.0 / 86400
	o.Demand.Load = 0.2
	s, err := o.loadSupply()
	if err != nil {
		t.Fatal(err)
	}
	d, err := o.loadDemand(s)
	if err != nil {
		t.Fatal(err)
	}
	horizon := int64(o.Days * 86400)
	a, sa, err := RunMarket(o.Market, s, d, horizon, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckConservation(s, d, a, horizon); err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, oc := range a.Outcomes {
		runs += len(oc.Runs)
	}
	if runs < 100 {
		t.Fatalf("%d jobs, %d runs: the shortened run placed too little to compare", len(d.Jobs), runs)
	}
	b, sb, err := RunMarket(o.Market, s, d, horizon, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) || sa != sb {
		t.Fatal("the same seed gave two different runs at 10,000 providers")
	}
}
