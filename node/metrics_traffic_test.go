package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/metrics"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/protocol"
	dto "github.com/prometheus/client_model/go"
)

// labelValues is every value the label takes in the family name.
func labelValues(fams map[string]*dto.MetricFamily, name, label string) map[string]bool {
	out := map[string]bool{}
	for _, m := range fams[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				out[lp.GetValue()] = true
			}
		}
	}
	return out
}

// Two real nodes on loopback: the provider's gossip reaches the renter
// and shows as published there and received, delivered here; stream bytes
// move by protocol; a hostile peer's unknown protocols and forged ledger
// heads make no labels but count as unnegotiated bytes and rejected
// messages.
func TestMetricsTraffic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prov := startMetricsNode(t, ctx, "127.0.0.1:0", "1xRTX4090", 1)
	if _, err := prov.provider.Update(func(s offers.Settings) (offers.Settings, error) {
		s.Region = auction.Region{Country: "DE", Continent: "eu"}
		s.Prices.Bronze, s.Prices.Silver = 500_000, 500_000
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	rent := startMetricsNode(t, ctx, "127.0.0.1:0", "", 1)
	if err := rent.Host().LibP2P().Connect(ctx, addrInfo(prov.Host())); err != nil {
		t.Fatal(err)
	}
	// The topics on which the provider knows the renter subscribed.
	shared := func() []string {
		var out []string
		for _, topic := range prov.Host().PubSub().GetTopics() {
			if slices.Contains(prov.Host().PubSub().ListPeers(topic), rent.Host().ID()) {
				out = append(out, topic)
			}
		}
		return out
	}
	eu := prov.Host().TopicName("offers/eu/1")
	waitFor(t, 20*time.Second, "the renter on the offer topic", func() bool { return slices.Contains(shared(), eu) })
	time.Sleep(1500 * time.Millisecond) // a heartbeat, for the mesh
	tok, err := prov.repo.Token()
	if err != nil {
		t.Fatal(err)
	}
	var show OfferShowResult
	for _, m := range []string{"offer_pause", "offer_resume"} { // each publishes synchronously
		if err := rpc.NewClient(prov.RPCURL(), tok).Call(ctx, m, nil, &show); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	var pub, recv, deliv float64
	waitFor(t, 20*time.Second, "the renter delivers the provider's gossip", func() bool {
		pf, rf := scrape(t, prov.MetricsURL()), scrape(t, rent.MetricsURL())
		pub, recv, deliv = 0, 0, 0
		for _, topic := range shared() {
			v, _ := sample(pf, "gleaner_gossip_messages_total", "topic", topic, "event", "published")
			pub += v
			v, _ = sample(rf, "gleaner_gossip_messages_total", "topic", topic, "event", "received")
			recv += v
			v, _ = sample(rf, "gleaner_gossip_messages_total", "topic", topic, "event", "delivered")
			deliv += v
		}
		return pub >= 2 && recv >= 1 && deliv >= 1
	})
	if deliv > recv {
		t.Errorf("renter delivered %v of %v received", deliv, recv)
	}

	rf := scrape(t, rent.MetricsURL())
	if v, _ := sample(rf, "gleaner_p2p_stream_bytes_total", "protocol", "/ipfs/id/1.0.0", "direction", "in"); v == 0 {
		t.Error("no identify bytes in")
	}
	var ours float64
	for p := range labelValues(rf, "gleaner_p2p_stream_bytes_total", "protocol") {
		if strings.HasPrefix(p, "/gleaner/"+repo.NetworkLocal+"/") {
			v, _ := sample(rf, "gleaner_p2p_stream_bytes_total", "protocol", p, "direction", "out")
			ours += v
		}
	}
	if ours == 0 {
		t.Error("no bytes out on any /gleaner/local/ protocol")
	}

	// The hostile peer: protocols we do not speak, and a forged ledger head.
	pf := scrape(t, prov.MetricsURL())
	unnegBefore, _ := sample(pf, "gleaner_p2p_stream_bytes_total", "protocol", p2p.Unnegotiated, "direction", "in")
	ledgerTopic := prov.Host().TopicName("ledger/1")
	rejBefore, _ := sample(pf, "gleaner_gossip_messages_total", "topic", ledgerTopic, "event", "rejected")
	h := hostileHost(t, ctx, prov)
	bogus := []protocol.ID{"/evil/1.0.0", h.ProtocolID("no-such/1")}
	for _, p := range bogus {
		if s, err := h.LibP2P().NewStream(ctx, prov.Host().ID(), p); err == nil {
			_ = s.Reset()
			t.Fatalf("the provider accepted %s", p)
		}
	}
	lt, err := h.Join("ledger/1", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the hostile peer on the ledger topic", func() bool { return len(lt.ListPeers()) > 0 })
	waitFor(t, 20*time.Second, "the forged head rejected", func() bool {
		if err := lt.Publish(ctx, []byte("not a head")); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		v, _ := sample(scrape(t, prov.MetricsURL()), "gleaner_gossip_messages_total", "topic", ledgerTopic, "event", "rejected")
		return v > rejBefore
	})
	pf = scrape(t, prov.MetricsURL())
	if v, _ := sample(pf, "gleaner_p2p_stream_bytes_total", "protocol", p2p.Unnegotiated, "direction", "in"); v <= unnegBefore {
		t.Errorf("unnegotiated bytes in %v, before %v", v, unnegBefore)
	}
	labels := labelValues(pf, "gleaner_p2p_stream_bytes_total", "protocol")
	for _, p := range bogus {
		if labels[string(p)] {
			t.Errorf("a label for the hostile peer's %s", p)
		}
	}
}

// Each RPC call moves its method's histogram; a method not registered
// counts as "unknown", with its error class, and makes no label of its
// own. A renter's auction with no provider ends no-match and is timed.
func TestMetricsRPCCallsAndAuctions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startMetricsNode(t, ctx, "127.0.0.1:0", "", 1)
	tok, err := n.repo.Token()
	if err != nil {
		t.Fatal(err)
	}
	c := rpc.NewClient(n.RPCURL(), tok)
	var info InfoResult
	for range 3 {
		if err := c.Call(ctx, "node_info", nil, &info); err != nil {
			t.Fatal(err)
		}
	}
	var e *rpc.Error
	if err := c.Call(ctx, "made_up_method_7", nil, nil); !errors.As(err, &e) || e.Code != rpc.CodeMethodNotFound {
		t.Fatalf("made_up_method_7: %v", err)
	}
	if err := c.Call(ctx, "job_status", []string{"no-such-job"}, nil); !errors.As(err, &e) || e.Code != renting.CodeNoSuchJob {
		t.Fatalf("job_status: %v", err)
	}
	spec := "name: lonely\nimage: alpine\nresources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\n" +
		"duration: {expected: 1m, max: 5m}\nretry: {max_reauctions: 0}\n"
	var job renting.JobRecord
	if err := c.Call(ctx, "job_submit", JobSubmitParams{Spec: spec}, &job); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the auction to end no-match", func() bool {
		v, _ := sample(scrape(t, n.MetricsURL()), "gleaner_auction_duration_seconds", "outcome", "no-match")
		return v == 1
	})
	fams := scrape(t, n.MetricsURL())
	if v, _ := sample(fams, "gleaner_rpc_call_duration_seconds", "method", "node_info"); v != 3 {
		t.Errorf("node_info calls = %v, want 3", v)
	}
	if v, _ := sample(fams, "gleaner_rpc_call_duration_seconds", "method", "unknown"); v != 1 {
		t.Errorf("unknown calls = %v, want 1", v)
	}
	if v, _ := sample(fams, "gleaner_rpc_call_errors_total", "method", "unknown", "class", "method_not_found"); v != 1 {
		t.Errorf("unknown method errors = %v, want 1", v)
	}
	if v, _ := sample(fams, "gleaner_rpc_call_errors_total", "method", "job_status", "class", "application"); v != 1 {
		t.Errorf("job_status application errors = %v, want 1", v)
	}
	if _, ok := sample(fams, "gleaner_rpc_call_errors_total", "method", "node_info"); ok {
		t.Error("errors counted for node_info, which succeeded")
	}
	if labelValues(fams, "gleaner_rpc_call_duration_seconds", "method")["made_up_method_7"] {
		t.Error("a label for a method the client made up")
	}
	if _, ok := sample(fams, "gleaner_auction_duration_seconds", "outcome", "awarded"); ok {
		t.Error("an awarded auction with no provider")
	}
}

// BenchmarkMetricsScrapeLiveNode is BenchmarkMetricsScrape on a running
// node, so that the host's series (streams, traffic by protocol, gossip by
// topic) are in the scrape too: 1,000 jobs and 1,000 lease records, one
// peer connected. The target: under 5 ms.
func BenchmarkMetricsScrapeLiveNode(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startNodeWith(b, ctx, func(c *repo.Config) { c.Metrics.Address = "127.0.0.1:0" }, Options{})
	hostileHost(b, ctx, n)
	lease := make([]byte, 600)
	recs := make([]renting.JobRecord, 0, 1000)
	for i := range 1000 {
		id := fmt.Sprintf("job-%04d", i)
		recs = append(recs, renting.JobRecord{ID: id, State: jobStates[i%len(jobStates)], Attempts: 1, Lease: lease})
	}
	n.renterJobs.Hold(recs, nil)
	err := n.store.Update(func(tx *store.Tx) error {
		for i := range 1000 {
			rec := providing.Record{Lease: lease, State: leaseStates[i%len(leaseStates)], Updated: time.Now()}
			if err := tx.Put(store.BucketLeases, fmt.Sprintf("job-%04d", i), rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	h := metrics.Handler(n.MetricsRegistry())
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if !strings.Contains(w.Body.String(), `gleaner_p2p_stream_bytes_total{direction="in",protocol="/ipfs/id/1.0.0"}`) {
		b.Fatalf("no traffic in the scrape:\n%s", w.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}
