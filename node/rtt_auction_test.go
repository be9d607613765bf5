package node

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/peers"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// Round trips measured in the quote exchange, on real daemons over
// loopback. Distance is stood in for by a provider whose ping handler
// delays its echo (what a far link looks like to the prober), and a
// provider that reads pings and never answers; a third answers as every
// gleaner host does.

// delayedEcho is a ping handler that answers each ping after delay; a
// negative delay never answers.
func delayedEcho(delay time.Duration) network.StreamHandler {
	return func(s network.Stream) {
		defer s.Close()
		buf := make([]byte, ping.PingSize)
		for {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if delay < 0 {
				_, _ = io.Copy(io.Discard, s)
				return
			}
			time.Sleep(delay)
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
	}
}

const rttTestSpec = "name: near\nimage: demo:1\ncommand: [\"-sleep\", \"1s\"]\nresources: {gpus: 1}\ntier: bronze\n" +
	"max_price: 1.00\nduration: {expected: 1m, max: 5m}\nallow_simulated: true\nplacement: {max_rtt_ms: 100}\n"

// A fresh renter, whose peerstore has measured none of the providers, and
// a spec with max_rtt_ms: each quoted provider's RTT is measured in the
// round; the near one is ranked by its measured loopback RTT and wins, the
// slow one is refused for its measured RTT and the silent one for having
// none, each with its reason, and the explain shows what the round used.
func TestAFreshRenterMeasuresRTTForMaxRTT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	near, slow, silent := startSeller(t, ctx, nil), startSeller(t, ctx, nil), startSeller(t, ctx, nil)
	slow.Host().LibP2P().SetStreamHandler(ping.ID, delayedEcho(150*time.Millisecond))
	silent.Host().LibP2P().SetStreamHandler(ping.ID, delayedEcho(-1))
	rn := renterOf(t, ctx, near, slow, silent)
	// What the renter knew before: nothing. The DHT's own requests may
	// have filled the peerstore's average meanwhile, so the test makes the
	// empty peerstore certain rather than hoping for it.
	rn.renterJobs.InjectRTT(func(string) (time.Duration, bool) { return 0, false })

	res, err := rn.renterJobs.Auctioneer().Auction(ctx, renter.Request{JobID: "rtt-1", SpecYAML: []byte(rttTestSpec), BillingSec: 300})
	if err != nil {
		t.Fatalf("%v; explain %+v", err, res.Explain)
	}
	ex, nid := res.Explain, near.Host().ID().String()
	if res.Lease.Provider != nid {
		t.Errorf("leased to %s, want the near provider %s", res.Lease.Provider, nid)
	}
	quotes := map[string]renter.QuoteOutcome{}
	for _, q := range ex.Quotes {
		quotes[q.Provider] = q
	}
	q := quotes[nid]
	if q.RTTSource != renter.RTTMeasured || q.RTT <= 0 || q.RTT >= 50*time.Millisecond {
		t.Errorf("near provider's quote %+v: want a measured loopback RTT under 50 ms", q)
	}
	if len(ex.Ranked) != 1 || ex.Ranked[0].RTT != q.RTT || ex.Ranked[0].RTTSource != renter.RTTMeasured || ex.Ranked[0].Parts.RTT <= 0.5 {
		t.Errorf("ranked %+v; want the near provider alone, at the RTT its quote shows", ex.Ranked)
	}
	if q := quotes[slow.Host().ID().String()]; q.RTTSource != renter.RTTMeasured || q.RTT < 150*time.Millisecond {
		t.Errorf("slow provider's quote %+v: want its delayed echo measured", q)
	}
	want := map[string]string{
		slow.Host().ID().String():   auction.ReasonRTT,
		silent.Host().ID().String(): "rtt not measured: no answer in 500ms",
	}
	for _, r := range ex.NotAdmitted {
		if w, ok := want[r.Provider]; ok && r.Check == auction.CheckRTT && r.Reason == w {
			delete(want, r.Provider)
		}
	}
	if len(want) > 0 {
		t.Errorf("not admitted %+v; missing %v", ex.NotAdmitted, want)
	}
}

// BenchmarkQuoteRTT is what measuring costs a round: the quote exchange
// with three providers on loopback, alone and with every provider's RTT
// measured alongside it, as the auctioneer does.
//
//	go test -run '^$' -bench BenchmarkQuoteRTT -benchtime 1x ./node/
func BenchmarkQuoteRTT(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var provs []*Node
	var ids []string
	for range 3 {
		p := startTestNode(b, ctx, "1xRTX4090", Options{})
		if _, err := p.provider.Update(func(s offers.Settings) (offers.Settings, error) {
			s.Region = auction.Region{Country: "DE", Continent: "eu"}
			s.Prices.Bronze, s.Prices.Silver = 500_000, 500_000
			return s, nil
		}); err != nil {
			b.Fatal(err)
		}
		p.provider.Poke()
		provs, ids = append(provs, p), append(ids, p.Host().ID().String())
	}
	rn := startTestNode(b, ctx, "", Options{})
	for _, p := range provs {
		if err := rn.Host().LibP2P().Connect(ctx, addrInfo(p.Host())); err != nil {
			b.Fatal(err)
		}
		waitFor(b, 20*time.Second, "an offer", func() bool { c := p.provider.Current(); return c != nil && len(c.GPUs) == 1 })
	}
	tr, pr := rn.renterJobs.QuoteTransport(), peers.NewProber(rn.Host().LibP2P(), 0)
	round := func(b *testing.B, probe bool) {
		rctx, rcancel := context.WithTimeout(ctx, renter.DefaultQuoteDeadline)
		defer rcancel()
		var wg sync.WaitGroup
		errs := make([]error, 2*len(ids))
		for k, id := range ids {
			wg.Go(func() {
				// One job asking again each round: its new quote replaces
				// its hold on the provider's one GPU (a new job each round
				// would find that GPU held by the last round's quote).
				_, decline, err := tr.Quote(rctx, id, "bench-round", []byte("0123456789abcdef"), []byte(rttTestSpec))
				if err == nil && decline != "" && !strings.Contains(decline, "busy") {
					err = fmt.Errorf("declined: %s", decline)
				}
				errs[2*k] = err
			})
			if probe {
				wg.Go(func() {
					pctx, pcancel := context.WithTimeout(rctx, renter.DefaultRTTDeadline)
					defer pcancel()
					_, errs[2*k+1] = pr.MeasureRTT(pctx, id)
				})
			}
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, probe := range []bool{false, true} {
		name := "quotes"
		if probe {
			name = "quotes+rtt"
		}
		b.Run(name, func(b *testing.B) {
			round(b, probe) // the streams' first use is not what a round costs
			for b.Loop() {
				round(b, probe)
			}
		})
	}
}
