package console

import (
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// benchFake answers like a node with 1,000 jobs and a book of 100,000
// offers: market_offers runs a real auction.Book query, as the node's
// does, so the page's time includes the query's.
func benchFake(b *testing.B) *fakeCaller {
	now := time.Now()
	r := rand.New(rand.NewSource(1))
	book := auction.NewBook(100_000, func() time.Time { return now })
	models := []string{"RTX4090", "H100", "A100-80GB", "L40S"}
	for i := 0; i < 100_000; i++ {
		o := &auction.Offer{Provider: fmt.Sprintf("12D3KooWBench%07d", i), Network: "local", Seq: 1,
			IssuedAt: now.Unix() - 60, ExpiresAt: now.Unix() + 3600,
			Region:  auction.Region{Country: "DE", Continent: "eu"},
			Windows: []auction.Window{{Start: now.Unix() - 60, End: now.Unix() + 86400}}}
		for g := 0; g < 1+r.Intn(4); g++ {
			o.GPUs = append(o.GPUs, auction.GPU{Model: models[r.Intn(len(models))], VRAMMiB: 24576, ComputeCap: "8.9", Simulated: i%10 == 0})
		}
		o.Prices.Bronze = auction.Credits(200_000 + r.Intn(2_000_000))
		if ok, err := book.Put(o, nil); !ok {
			b.Fatal(err)
		}
	}
	jobs := make([]jobRecord, 1000)
	for i := range jobs {
		jobs[i] = jobRecord{ID: fmt.Sprintf("job-%04d", i), Name: "train", State: "completed", Provider: "12D3KooWBench0000001",
			Price: 450_000, GPUs: 1, Simulated: true, Created: now.Add(-time.Duration(i) * time.Minute), Paid: 123_456}
	}
	days := make([]earningsDay, 366)
	for i := range days {
		fill := int64(r.Intn(10000))
		days[i] = earningsDay{Day: now.AddDate(0, 0, i-365).Format("2006-01-02"), Earned: auction.Credits(r.Intn(50_000_000)), LeasedGPUS: 3600, OfferedGPUS: 86400, FillBP: &fill}
	}
	gpus := []gpuStatus{}
	for i := 0; i < 8; i++ {
		g := gpuStatus{Offered: true, Lease: &gpuLease{JobID: "job-0001", Renter: "12D3KooWRenter", Tier: "silver", State: "running", Price: 700_000, Until: now.Add(time.Hour)}}
		g.Index, g.Model, g.VRAMMiB, g.TempC, g.PowerW, g.PowerLimitW = i, "RTX4090", 24576, 61, 312, 450
		gpus = append(gpus, g)
	}
	return &fakeCaller{results: map[string]any{
		"node_info":       nodeInfo{PeerID: "12D3KooWBenchNode", Network: "testnet", Peers: 40},
		"ledger_balance":  balance{Faucet: 1_000_000_000, Balance: 1_000_000_000},
		"offer_show":      offerShow{Offered: true, GPUs: gpus},
		"job_list":        jobs,
		"job_status":      jobs[1],
		"job_explain":     jobExplain{Considered: 100_000, Winner: "12D3KooWBench0000001", ClearingPrice: 450_000},
		"ledger_earnings": earnings{Days: days},
		"job_logs":        jobLogs{Logs: strings.Repeat("step 12345/99999 done: loss 0.0123\n", 7000)}, // the retained 256 KiB
		"service_list":    benchServices(),
		"service_status":  benchServices()[0],
		"ledger_spend":    benchSpend(now, days),
		"market_stats": func(any) (any, error) {
			return marketStats{BookStats: book.Stats(), OnDemand: map[string]auction.Credits{"H100": 2_250_000, "RTX4090": 400_000}, OnDemandSource: "prices.csv"}, nil
		},
		"rep_show": evidence{Peer: "12D3KooWBenchNode", Leases: 1000, PaidTotal: 123_456_000, Outcomes: map[ledger.OutcomeResult]int{ledger.OutcomeCompleted: 990, ledger.OutcomeFailed: 10}},
		"market_offers": func(params any) (any, error) {
			p := params.(map[string]any)
			q, err := auction.ParseQuery(p["query"].(string))
			if err != nil {
				return nil, &rpc.Error{Code: rpc.CodeInvalidParams, Message: err.Error()}
			}
			offers, ex, err := book.Query(q, p["order"].(string), p["limit"].(int))
			if err != nil {
				return nil, err
			}
			res := marketOffers{Explain: ex}
			for _, o := range offers {
				res.Offers = append(res.Offers, offerView{Provider: o.Provider, GPUs: o.GPUs, GPUCount: len(o.GPUs), Region: o.Region,
					Prices: map[string]auction.Credits{"bronze": o.Prices.Bronze}, AvailableForS: auction.AvailableFor(o.Windows, now).Milliseconds() / 1000})
			}
			return res, nil
		},
	}}
}

// BenchmarkConsolePages renders each page, server-side, for a node with
// 1,000 jobs and 100,000 offers in its book. The bound: 50 ms a
// page, the mean over the run; a page past it fails the benchmark.
func BenchmarkConsolePages(b *testing.B) {
	f := benchFake(b)
	benchProvider(f) // provider_pages_test.go: offer settings, a week, leases
	c := testConsole(b, f, func(o *Options) { o.LoginBurst = 1000; o.HistoryEvery = time.Hour })
	benchHistory(c) // a full six hours of samples for the GPU page
	w := do(c, "POST", "/ui/login", map[string][]string{"token": {testToken}}, nil)
	ck := w.Result().Cookies()[0]
	for _, p := range []struct{ name, path string }{
		{"overview", "/ui/"}, {"gpus", "/ui/gpus"}, {"jobs", "/ui/jobs"}, {"job", "/ui/jobs/job-0001"},
		{"market", "/ui/market"}, {"market-model", "/ui/market?model=H100"}, {"market-stale", "/ui/market"}, {"market-query", "/ui/market?q=gpu+in+%5BH100%2CA100-80GB%5D+price.bronze%3C%3D1.5&order=price.bronze"},
		{"earnings", "/ui/earnings?days=366"},
		{"services", "/ui/services"}, {"service", "/ui/services/svc-000"}, {"spend", "/ui/spend?days=366"},
		{"offer", "/ui/offer"}, {"calendar", "/ui/calendar"}, {"gpu", "/ui/gpus/0"}, {"reputation", "/ui/reputation"},
	} {
		b.Run(p.name, func(b *testing.B) {
			var size int
			for i := 0; i < b.N; i++ {
				if p.name == "market-stale" {
					c.mkt.forget() // the worst case: no fresh sample, so the page summarises the book itself
				}
				w := do(c, "GET", p.path, nil, withCookie(ck))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, w.Code, w.Body)
				}
				size = w.Body.Len()
			}
			ms := float64(b.Elapsed().Microseconds()) / 1000 / float64(b.N)
			b.ReportMetric(ms, "ms/page")
			b.ReportMetric(float64(size)/1024, "KiB")
			if ms > pageBoundMS {
				b.Errorf("%s: %.1f ms a page, past the %d ms bound", p.path, ms, pageBoundMS)
			}
		})
	}
}

// pageBoundMS is the bound on a page's server-side time.
const pageBoundMS = 50

// benchServices: 100 services of 32 replicas each, the first with figures.
func benchServices() []serviceView {
	out := make([]serviceView, 100)
	for i := range out {
		sv := serviceView{Name: fmt.Sprintf("svc-%03d", i), URL: "http://127.0.0.1:8100", Gateway: "up", Created: time.Now()}
		st := &serviceStats{Window: time.Minute}
		for r := 0; r < 32; r++ {
			id := fmt.Sprintf("job-%03d-%02d", i, r)
			sv.Replicas = append(sv.Replicas, serviceReplica{Index: r, Job: id, State: "running", Provider: "12D3KooWBench0000001", Ready: true})
			st.Replicas = append(st.Replicas, gateway.ReplicaStats{ID: id, Ready: true, Figures: gateway.Figures{Requests: 1000, QPS: 3.2, LatencyP50: 20 * time.Millisecond, PerKRequests: 2_000_000}})
		}
		if i == 0 {
			sv.Stats = st
		}
		out[i] = sv
	}
	return out
}

// benchSpend: a year of days and 1,000 leases.
func benchSpend(now time.Time, days []earningsDay) spendResult {
	s := spendResult{From: now.AddDate(0, 0, -365), To: now}
	for _, d := range days {
		s.Days = append(s.Days, spendDay{Day: d.Day, Spent: d.Earned})
		s.Spent += d.Earned
	}
	for i := 0; i < 1000; i++ {
		s.Leases = append(s.Leases, spendLease{Day: days[i%len(days)].Day, Name: "train", JobID: fmt.Sprintf("job-%04d", i), Lease: "bafy", Provider: "12D3KooWBench0000001", Spent: 123_456, Source: "settlement"})
	}
	s.ByName = []spendName{{Name: "train", Jobs: 1000, Leases: 1000, Spent: s.Spent}}
	return s
}
