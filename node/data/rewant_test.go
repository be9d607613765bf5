package data

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/p2p"
	"github.com/ipfs/go-cid"
)

// rewantPair is a relayed pair whose circuits carry 1 MiB each way, and a
// 6 MiB file on the home peer: a fetch of it meets about ten resets.
func rewantPair(tb testing.TB) (relayedPair, cid.Cid, string) {
	tb.Helper()
	res := p2p.RelayResources()
	res.Limit.Data = 1 << 20
	p := newRelayedPair(tb, res)
	src := tb.TempDir()
	writeFiles(tb, src, map[string]string{"big.bin": noise(21, 24*ChunkSize)})
	root, err := p.home.s.Add(context.Background(), src)
	if err != nil {
		tb.Fatal(err)
	}
	return p, root, src
}

// rewantBound is how long a fetch of rewantPair's file may take: far more
// than it takes (under a second unloaded), less than the 30 s after which
// bitswap itself sends again a want it deems sent on a stream that broke
// (boxo's messagequeue rebroadcastInterval), the stall the re-want ends.
const rewantBound = 20 * time.Second

// TestExchangeFetchRewantsAfterRedial: a fetch that outgrows circuit after
// circuit wants its missing blocks again after each redial (redial.go)
// and so never waits for bitswap's rebroadcast. With the re-want off
// (noRewant), two of four runs of this test stalled past rewantBound at
// some reset, and the hook below failed all four.
func TestExchangeFetchRewantsAfterRedial(t *testing.T) {
	for i := range 3 {
		p, root, src := rewantPair(t)
		ctx, cancel := context.WithTimeout(context.Background(), rewantBound)
		_, err := p.fetcher.x.Fetch(ctx, root, nil)
		cancel()
		if err != nil {
			t.Fatalf("fetch %d of 6 MiB through circuits of 1 MiB: %v (%d circuits reset, %d re-wants)", i, err, p.resets.Load(), p.fetcher.x.rewants.Load())
		}
		sameTree(t, p.fetcher.s, root, src)
		if p.resets.Load() == 0 {
			t.Fatal("no circuit was reset: the test proves nothing")
		}
		if p.fetcher.x.rewants.Load() == 0 {
			t.Errorf("fetch %d: %d circuits reset and no re-want", i, p.resets.Load())
		}
		p.onlyRelayed(t)
	}
}

// BenchmarkFetchOutgrowsCircuits fetches rewantPair's 6 MiB through
// circuits of 1 MiB (about ten resets a fetch), rounds times with the
// re-want after a redial and rounds times without, each from a fresh
// pair, and reports the mean seconds a fetch took each way and stall-x,
// the one without over the one with. A fetch without the re-want that
// stalls is cut off at plainCap and counted as plainCap (it would have
// waited 30 s or more), so stall-x is a lower bound; plain-stalls counts
// them.
func BenchmarkFetchOutgrowsCircuits(b *testing.B) {
	const rounds = 4
	const plainCap = 10 * time.Second
	for range b.N {
		var with, without time.Duration
		stalls := 0
		for range rounds {
			for _, rewant := range []bool{true, false} {
				p, root, _ := rewantPair(b)
				p.fetcher.x.noRewant = !rewant
				limit := rewantBound
				if !rewant {
					limit = plainCap
				}
				ctx, cancel := context.WithTimeout(context.Background(), limit)
				start := time.Now()
				_, err := p.fetcher.x.Fetch(ctx, root, nil)
				took := time.Since(start)
				cancel()
				switch {
				case err == nil:
				case !rewant && errors.Is(err, context.DeadlineExceeded):
					stalls++
					took = plainCap
				default:
					b.Fatalf("fetch (re-want %v): %v", rewant, err)
				}
				if rewant {
					with += took
				} else {
					without += took
				}
			}
		}
		b.ReportMetric(with.Seconds()/rounds, "rewant-s")
		b.ReportMetric(without.Seconds()/rounds, "plain-s")
		b.ReportMetric(without.Seconds()/with.Seconds(), "stall-x")
		b.ReportMetric(float64(stalls), "plain-stalls")
	}
}
