package data

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
)

// BenchmarkFetch fetches the benchmark file's DAG (benchMiB, 64 MiB by
// default) over loopback libp2p into a fresh store each round, from one
// seeder and from three that each hold all of it; tcp-copy sends as many
// bytes over one plain loopback TCP connection, the limit a fetch is
// compared with. Each fetch reports its speed as a fraction of the
// tcp-copy round run first (vs-tcp).
func BenchmarkFetch(b *testing.B) {
	p, size := benchFile(b)
	var tcpRate float64 // bytes/s of tcp-copy, for vs-tcp

	b.Run("tcp-copy", func(b *testing.B) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					io.Copy(io.Discard, c)
					c.Close()
				}()
			}
		}()
		b.SetBytes(size)
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(c, f); err != nil {
				b.Fatal(err)
			}
			c.Close()
			f.Close()
		}
		tcpRate = float64(size) * float64(b.N) / time.Since(start).Seconds()
	})

	// The seeders serve every sub-benchmark: three stores holding the DAG.
	var seeders []*benchNode
	var root cid.Cid
	for i := 0; i < 3; i++ {
		n := newBenchNode(b, 4*size)
		c, err := n.s.Add(context.Background(), p)
		if err != nil {
			b.Fatal(err)
		}
		root = c
		seeders = append(seeders, n)
	}

	for _, peers := range []int{1, 3} {
		b.Run("peers="+strconv.Itoa(peers), func(b *testing.B) {
			h := newHost(b)
			for _, s := range seeders[:peers] {
				connect(b, h, s.h)
			}
			dir := b.TempDir()
			b.SetBytes(size)
			stop := peakHeap(b) // seeders' and fetcher's heap together
			defer stop()
			b.ResetTimer()
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s, err := OpenStore(filepath.Join(dir, strconv.Itoa(i)), 4*size)
				if err != nil {
					b.Fatal(err)
				}
				x, err := NewExchange(context.Background(), ExchangeConfig{Host: h, ProtocolPrefix: testPrefix, Store: s})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				b.StartTimer()
				start := time.Now()
				res, err := x.Fetch(ctx, root, nil)
				elapsed += time.Since(start)
				b.StopTimer()
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if res.Peers != peers {
					b.Logf("blocks came from %d of %d seeders", res.Peers, peers)
				}
				x.Close()
				s.Close()
				os.RemoveAll(filepath.Join(dir, strconv.Itoa(i)))
				b.StartTimer()
			}
			if tcpRate > 0 {
				rate := float64(size) * float64(b.N) / elapsed.Seconds()
				b.ReportMetric(rate/tcpRate, "vs-tcp")
			}
		})
	}
}

type benchNode struct {
	h host.Host
	s *Store
	x *Exchange
}

func newBenchNode(b *testing.B, quota int64) *benchNode {
	b.Helper()
	n := &benchNode{h: newHost(b)}
	s, err := OpenStore(filepath.Join(b.TempDir(), "blocks"), quota)
	if err != nil {
		b.Fatal(err)
	}
	n.s = s
	x, err := NewExchange(context.Background(), ExchangeConfig{Host: n.h, ProtocolPrefix: testPrefix, Store: s})
	if err != nil {
		b.Fatal(err)
	}
	n.x = x
	b.Cleanup(func() {
		x.Close()
		s.Close()
	})
	return n
}
