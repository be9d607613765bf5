package p2p

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// BenchmarkFrameAccounting is the cost of charging frames to the memory
// budget on the honest path: frames of a quote's size (4 KiB) and a
// large start's (1 MiB) sent over one real libp2p stream and read with
// ReadFrame, from the stream itself (accounted on its scope) and from the
// same stream behind a plain io.Reader (nothing to charge), alternately
// in the same run. It reports ns per frame for each and their ratio, and
// the cost of one reservation and release on the stream's scope alone.
func BenchmarkFrameAccounting(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(byteSize(size), func(b *testing.B) {
			reader := newTestHost(b, "framebench")
			writer := newTestHost(b, "framebench")
			frames := make(chan network.Stream, 1)
			reader.LibP2P().SetStreamHandler(reader.ProtocolID("bench/1"), func(s network.Stream) { frames <- s })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := writer.Connect(ctx, info(reader)); err != nil {
				b.Fatal(err)
			}
			ws, err := writer.LibP2P().NewStream(ctx, reader.ID(), reader.ProtocolID("bench/1"))
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Reset()
			payload := make([]byte, size)
			// The writer runs from the start: the handler runs on the
			// first bytes, and a large frame waits for its reader.
			go func() {
				for {
					if WriteFrame(ws, payload, size) != nil {
						return
					}
				}
			}()
			rs := <-frames
			defer rs.Reset()
			const perRound = 64
			// The same stream, with its Scope hidden: ReadFrame charges
			// nothing for it.
			plain := struct{ io.Reader }{rs}
			var took [2]time.Duration // accounted, plain
			for range b.N {
				for i, r := range []io.Reader{rs, plain} {
					start := time.Now()
					for range perRound {
						if _, err := ReadFrame(r, size); err != nil {
							b.Fatal(err)
						}
					}
					took[i] += time.Since(start)
				}
			}
			// What the accounting itself costs: one reservation and its
			// release on the live stream's scope, without the transfer
			// whose noise dominates small frames.
			const reserves = 10000
			start := time.Now()
			for range reserves {
				release, err := reserveFrame(rs, size)
				if err != nil {
					b.Fatal(err)
				}
				release()
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/reserves, "ns/reservation")
			accounted, unaccounted := took[0], took[1]
			n := float64(b.N * perRound)
			b.ReportMetric(float64(accounted.Nanoseconds())/n, "ns/frame-accounted")
			b.ReportMetric(float64(unaccounted.Nanoseconds())/n, "ns/frame-plain")
			b.ReportMetric(float64(accounted)/float64(unaccounted), "accounted/plain")
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
