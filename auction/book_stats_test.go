package auction

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"
)

func TestBookStats(t *testing.T) {
	c := newClock()
	b := NewBook(100, c.now)
	put := func(i int, gpus []GPU, p Prices, r Region, ttl int64) {
		o := validOffer(fakeID(uint64(i)), t0)
		o.GPUs, o.Prices, o.Region, o.ExpiresAt = gpus, p, r, t0.Unix()+ttl
		mustPut(t, b, o)
	}
	h100 := GPU{Model: "H100", VRAMMiB: 81559, ComputeCap: "9.0"}
	simH100 := h100
	simH100.Simulated = true
	a100 := GPU{Model: "A100", VRAMMiB: 40960, ComputeCap: "8.0"}
	de, us := Region{"DE", "eu"}, Region{"US", "na"}
	put(1, []GPU{h100, h100}, Prices{Silver: 2_000_000, Bronze: 1_000_000}, de, 3600)
	put(2, []GPU{simH100}, Prices{Bronze: 1_500_000}, de, 3600)
	put(3, []GPU{h100, a100}, Prices{Gold: 3_000_000, Bronze: 800_000}, us, 3600)
	put(4, []GPU{a100}, Prices{Bronze: 9_000_000}, us, 60) // expires below
	c.add(2 * time.Minute)

	st := b.Stats()
	if st.Offers != 3 || st.GPUs != 5 || st.OtherModels != 0 {
		t.Fatalf("totals %+v", st)
	}
	want := []PriceStat{
		{Model: "H100", Tier: Gold, Offers: 1, GPUs: 1, Min: 3_000_000, Median: 3_000_000, Max: 3_000_000},
		{Model: "H100", Tier: Silver, Offers: 1, GPUs: 2, Min: 2_000_000, Median: 2_000_000, Max: 2_000_000},
		// 0.8, 1.0, 1.5: the middle one; one of the three offers is simulated.
		{Model: "H100", Tier: Bronze, Offers: 3, GPUs: 4, Simulated: 1, Min: 800_000, Median: 1_000_000, Max: 1_500_000},
		{Model: "A100", Tier: Gold, Offers: 1, GPUs: 1, Min: 3_000_000, Median: 3_000_000, Max: 3_000_000},
		{Model: "A100", Tier: Bronze, Offers: 1, GPUs: 1, Min: 800_000, Median: 800_000, Max: 800_000},
	}
	if fmt.Sprint(st.Prices) != fmt.Sprint(want) {
		t.Errorf("prices\n got %v\nwant %v", st.Prices, want)
	}
	wantR := []SupplyStat{{"eu", "DE", 2, 3, 1}, {"na", "US", 1, 2, 0}}
	if fmt.Sprint(st.Regions) != fmt.Sprint(wantR) {
		t.Errorf("regions %v, want %v", st.Regions, wantR)
	}

	// An even count's median is the mean of the middle two.
	put(5, []GPU{h100}, Prices{Bronze: 1_100_000}, de, 3600)
	if p := b.Stats().Prices[2]; p.Median != 1_050_000 || p.Offers != 4 {
		t.Errorf("even median %+v", p)
	}
	// Made-up models past the bound are counted, not listed.
	for i := 0; i < MaxStatModels+5; i++ {
		put(100+i, []GPU{{Model: fmt.Sprintf("X%02d", i), VRAMMiB: 1024, ComputeCap: "8.0"}}, Prices{Bronze: 1}, de, 3600)
	}
	if st := b.Stats(); st.OtherModels != 7 || st.Prices[0].Model != "H100" {
		t.Errorf("with %d more models: %d left out, first %s", MaxStatModels+5, st.OtherModels, st.Prices[0].Model)
	}
}

// BenchmarkBookStats summarises 100,000 offers drawn from the price trace,
// as the console's market sampler asks once a minute and its page once
// a view.
func BenchmarkBookStats(b *testing.B) {
	rows := loadTrace(b)
	r := rand.New(rand.NewSource(1))
	now := time.Unix(t0.Unix(), 0)
	book := NewBook(100_000, func() time.Time { return now })
	for i := 0; i < 100_000; i++ {
		if ok, err := book.Put(traceOffer(r, rows[r.Intn(len(rows))], fakeID(uint64(i)), now.Unix()), nil); !ok {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		book.Stats()
	}
}

// TestSpread checks the selection against a sort, on random lists with
// many repeats and none.
func TestSpread(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for round := 0; round < 2000; round++ {
		n := 1 + r.Intn(50)
		ps := make([]Credits, n)
		for i := range ps {
			ps[i] = Credits(r.Intn([]int{3, 1000, 1 << 30}[round%3]))
		}
		sorted := slices.Clone(ps)
		slices.Sort(sorted)
		want := sorted[n/2]
		if n%2 == 0 {
			want = sorted[n/2-1] + (sorted[n/2]-sorted[n/2-1])/2
		}
		lo, hi, med := spread(ps)
		if lo != sorted[0] || hi != sorted[n-1] || med != want {
			t.Fatalf("%v: got %d %d %d, want %d %d %d", sorted, lo, hi, med, sorted[0], sorted[n-1], want)
		}
	}
}
