package p2p

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

const (
	benchNodes   = 100
	benchMsgSize = 4 << 10
	sigLen       = 64 // Ed25519
)

// BenchmarkGossipPropagation measures per-receiver delivery latency of a
// 4 KiB message published by one node to 99 others, through our Join path
// (size check + Ed25519 signature verification at every hop) and through
// bare gossipsub on the same hosts, interleaved in the same run.
func BenchmarkGossipPropagation(b *testing.B) {
	b.Run("loopback", func(b *testing.B) {
		hs := make([]*Host, benchNodes)
		for i := range hs {
			hs[i] = newTestHost(b, "bench", Logger(quietLog))
		}
		wireSparse(b, hs, func(*Host, *Host) {})
		runGossipBench(b, hs)
	})
	b.Run("latency25ms", func(b *testing.B) {
		mn, hs := newMockHosts(b, benchNodes, 25*time.Millisecond)
		wireSparse(b, hs, func(x, y *Host) {
			if _, err := mn.LinkPeers(x.ID(), y.ID()); err != nil {
				b.Fatal(err)
			}
		})
		runGossipBench(b, hs)
	})
}

// wireSparse connects node i to one or two random earlier nodes: a connected
// graph of mean degree ~4, like a young network before discovery fills in.
func wireSparse(b testing.TB, hs []*Host, link func(x, y *Host)) {
	rng := mrand.New(mrand.NewPCG(1, 2))
	var pairs [][2]*Host
	for i := 1; i < len(hs); i++ {
		pairs = append(pairs, [2]*Host{hs[i], hs[rng.IntN(i)]})
		if j := rng.IntN(i); i > 1 && hs[j] != pairs[len(pairs)-1][1] {
			pairs = append(pairs, [2]*Host{hs[i], hs[j]})
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, p := range pairs {
		link(p[0], p[1])
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// Retried: on a shared 2-core box handshakes of 100 fresh hosts
			// can time out while their DHTs bootstrap.
			var err error
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err = p[0].Connect(ctx, info(p[1]))
				cancel()
				if err == nil {
					return
				}
			}
			b.Error(err)
		}()
	}
	wg.Wait()
}

// verifyOffer is the "real check" an offer validator does: the payload's
// last 64 bytes are an Ed25519 signature, by the message author, over the rest.
func verifyOffer(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	author, err := peer.IDFromBytes(m.From)
	if err != nil || len(m.Data) < sigLen {
		return pubsub.ValidationReject
	}
	pk, err := author.ExtractPublicKey()
	if err != nil {
		return pubsub.ValidationReject
	}
	body, sig := m.Data[:len(m.Data)-sigLen], m.Data[len(m.Data)-sigLen:]
	if ok, err := pk.Verify(body, sig); err != nil || !ok {
		return pubsub.ValidationReject
	}
	return pubsub.ValidationAccept
}

type arrival struct {
	seq uint64
	at  time.Time
}

// benchTopic is one topic joined on every host, with a collector per host.
type benchTopic struct {
	pub      *pubsub.Topic
	arrivals chan arrival
}

func joinBench(b *testing.B, hs []*Host, join func(h *Host) (*pubsub.Topic, error)) *benchTopic {
	bt := &benchTopic{arrivals: make(chan arrival, len(hs)*4)}
	for i, h := range hs {
		tp, err := join(h)
		if err != nil {
			b.Fatal(err)
		}
		sub, err := tp.Subscribe(pubsub.WithBufferSize(256))
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			bt.pub = tp
		}
		self := h.ID()
		go func() {
			for {
				m, err := sub.Next(context.Background())
				if err != nil {
					return
				}
				if m.ReceivedFrom != self { // skip the publisher's own copy
					bt.arrivals <- arrival{binary.BigEndian.Uint64(m.Data), time.Now()}
				}
			}
		}()
	}
	return bt
}

// publishOne sends message seq and returns the 99 delivery latencies.
func (bt *benchTopic) publishOne(b *testing.B, seq uint64, key crypto.PrivKey, want int) []time.Duration {
	payload := make([]byte, benchMsgSize)
	_, _ = rand.Read(payload)
	binary.BigEndian.PutUint64(payload, seq)
	start := time.Now() // before signing: signing is part of the cost
	if key != nil {
		sig, err := key.Sign(payload[:benchMsgSize-sigLen])
		if err != nil {
			b.Fatal(err)
		}
		copy(payload[benchMsgSize-sigLen:], sig)
	}
	if err := bt.pub.Publish(context.Background(), payload); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, want)
	timeout := time.After(20 * time.Second)
	for len(lat) < want {
		select {
		case a := <-bt.arrivals:
			if a.seq == seq {
				lat = append(lat, a.at.Sub(start))
			}
		case <-timeout:
			b.Fatalf("message %d reached %d of %d nodes", seq, len(lat), want)
		}
	}
	return lat
}

func runGossipBench(b *testing.B, hs []*Host) {
	ours := joinBench(b, hs, func(h *Host) (*pubsub.Topic, error) {
		return h.Join("bench/ours/1", verifyOffer, benchMsgSize)
	})
	bare := joinBench(b, hs, func(h *Host) (*pubsub.Topic, error) {
		return h.PubSub().Join(h.TopicName("bench/bare/1"))
	})
	eventually(b, 60*time.Second, "topic peers on every node", func() bool {
		for _, h := range hs {
			if len(h.PubSub().ListPeers(h.TopicName("bench/ours/1"))) == 0 ||
				len(h.PubSub().ListPeers(h.TopicName("bench/bare/1"))) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(3 * time.Second) // a few heartbeats so meshes reach degree D
	// 100 fresh DHT nodes refresh routing tables and provide for a while;
	// measuring during that storm measures the 2-core scheduler, not gossip.
	waitQuiet(b, 0.5, 45*time.Second)
	key := hs[0].LibP2P().Peerstore().PrivKey(hs[0].ID())
	var latOurs, latBare []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		seq := uint64(i)
		// alternate the order so neither path always runs on a warmer system
		if i%2 == 0 {
			latOurs = append(latOurs, ours.publishOne(b, seq, key, len(hs)-1)...)
			latBare = append(latBare, bare.publishOne(b, seq, nil, len(hs)-1)...)
		} else {
			latBare = append(latBare, bare.publishOne(b, seq, nil, len(hs)-1)...)
			latOurs = append(latOurs, ours.publishOne(b, seq, key, len(hs)-1)...)
		}
	}
	b.StopTimer()
	p50, p95 := percentile(latOurs, 50), percentile(latOurs, 95)
	b50, b95 := percentile(latBare, 50), percentile(latBare, 95)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p95), "p95-ms")
	b.ReportMetric(ms(b50), "bare-p50-ms")
	b.ReportMetric(ms(b95), "bare-p95-ms")
	b.ReportMetric(float64(p95)/float64(b95), "p95-ratio")
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// waitQuiet waits until the process used less than frac of one core over a
// one-second window, or until max has passed.
func waitQuiet(b *testing.B, frac float64, max time.Duration) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		c0 := cpu()
		time.Sleep(time.Second)
		if used := cpu() - c0; used < time.Duration(frac*float64(time.Second)) {
			return
		}
	}
	b.Logf("process still busy after %v; numbers will be noisy", max)
}
