package ledger

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAppend measures entries validated (decode, schema, signature)
// and durably stored (one fsync'd bbolt transaction each) per second.
func BenchmarkAppend(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ses := signedChain(b, b.N)
	b.ResetTimer()
	for _, se := range ses {
		if err := s.Append(se); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkAppendBatch is what replication pays per entry when a peer
// sends a range: full validation (signature included) of every entry, one
// fsync per batch of 256.
//
//	go test -run '^$' -bench AppendBatch -benchtime 20000x ./ledger
func BenchmarkAppendBatch(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ses := signedChain(b, b.N)
	b.ResetTimer()
	for i := 0; i < len(ses); i += 256 {
		errs, err := s.AppendBatch(ses[i:min(i+256, len(ses))])
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				b.Fatal(e)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// signedChain is one author's feed of n entries with 512-byte payloads.
func signedChain(b *testing.B, n int) []*SignedEntry {
	k := newKey(b)
	ses := make([]*SignedEntry, n)
	var prev *Entry
	payload := make([]byte, 512)
	for i := range ses {
		e, se, err := NewEntry(k, prev, TypeTelemetryDigest, payload, t0)
		if err != nil {
			b.Fatal(err)
		}
		prev, ses[i] = e, se
	}
	return ses
}

// BenchmarkOwnAppendUnderReplication is a node's own append (a provider's
// lease, on the award's path) while 8 peers' ranges of 4 entries are
// being stored without pause, as in a burst of auctions on a busy mesh:
// "one-tx-per-range" stores each range in a transaction of its own
// (AppendBatch, what replication did), "group-commit" through
// AppendReplicated. own-p50-ms and own-p95-ms are the own append's
// latency; replicated/s what replication stored meanwhile. The ratio of
// the two sub-benchmarks' own-p95-ms, measured in one run, is the figure.
//
//	go test -run '^$' -bench OwnAppendUnderReplication -benchtime 200x ./ledger
func BenchmarkOwnAppendUnderReplication(b *testing.B) {
	for _, mode := range []string{"one-tx-per-range", "group-commit"} {
		b.Run(mode, func(b *testing.B) {
			s, _ := openTemp(b)
			defer s.Close()
			store := s.AppendBatch
			if mode == "group-commit" {
				store = s.AppendReplicated
			}
			const peers, rangeLen = 8, 4
			// Each peer's feed, long enough for the whole run.
			feeds := make([][]*SignedEntry, peers)
			for p := range feeds {
				feeds[p] = signedChain(b, rangeLen*(b.N/2+50))
			}
			own := signedChain(b, b.N)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var replicated atomic.Int64
			for p := range peers {
				wg.Go(func() {
					for i := 0; i+rangeLen <= len(feeds[p]); i += rangeLen {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := store(feeds[p][i : i+rangeLen]); err != nil {
							b.Error(err)
							return
						}
						replicated.Add(rangeLen)
					}
				})
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for _, se := range own {
				t := time.Now()
				if err := s.Append(se); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "own-p50-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "own-p95-ms")
			b.ReportMetric(float64(replicated.Load())/b.Elapsed().Seconds(), "replicated/s")
		})
	}
}
