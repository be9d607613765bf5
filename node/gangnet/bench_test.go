package gangnet

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// benchChunk is what one benchmark op sends: small enough that CI's single
// run (-benchtime 1x) is quick, large enough that a round trip per chunk
// is a small part of it.
const benchChunk = 8 << 20

// ackSink is a container that acknowledges every benchChunk bytes it
// reads with one byte, and every byte when per is 1 (an echo of sorts).
func ackSink(b *testing.B, per int) net.Addr {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				n := 0
				for {
					k, err := c.Read(buf[:min(len(buf), per-n)])
					if err != nil {
						return
					}
					if n += k; n == per {
						n = 0
						if _, err := c.Write([]byte{1}); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr()
}

// benchPaths are two persistent connections to one sink: direct, and
// through rank 0's listener for rank 1, its stream and rank 1's provider.
func benchPaths(b *testing.B, per int) (direct, forwarded net.Conn) {
	direct, forwarded, _ = benchRigPaths(b, per)
	return direct, forwarded
}

// benchRigPaths is benchPaths, with the rig whose providers forward.
func benchRigPaths(b *testing.B, per int) (direct, forwarded net.Conn, rig *gangRig) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	b.Cleanup(cancel)
	rig = newGangRig(b, ctx, "bench", 2, DefaultLimits())
	sink := ackSink(b, per)
	idle := ackSink(b, per)
	m0, err := rig.provs[0].net.Join(Local{Roster: rig.roster, Rank: 0, Lease: leaseOf(0), ListenIP: loopback, Container: At(idle.(*net.TCPAddr).AddrPort())})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := rig.provs[1].net.Join(Local{Roster: rig.roster, Rank: 1, Lease: leaseOf(1), ListenIP: loopback, Container: At(sink.(*net.TCPAddr).AddrPort())}); err != nil {
		b.Fatal(err)
	}
	for _, addr := range []string{sink.String(), m0.Peers()[1]} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		if direct == nil {
			direct = c
		} else {
			forwarded = c
		}
	}
	return direct, forwarded, rig
}

// sendChunk writes per bytes from buf and waits for the sink's ack.
func sendChunk(b *testing.B, c net.Conn, buf []byte, per int) time.Duration {
	t0 := time.Now()
	for sent := 0; sent < per; {
		n, err := c.Write(buf[:min(len(buf), per-sent)])
		if err != nil {
			b.Fatal(err)
		}
		sent += n
	}
	if _, err := io.ReadFull(c, buf[:1]); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// BenchmarkGangForwardThroughput: bytes from rank 0's process to rank 1's
// container through the two providers' forwarders over one libp2p
// connection on localhost, against a direct TCP connection to the same
// container in the same run. Each op sends benchChunk bytes both ways
// round (direct, then forwarded) and waits for the container's ack;
// "ratio" is forwarded throughput over direct.
func BenchmarkGangForwardThroughput(b *testing.B) {
	direct, fwd := benchPaths(b, benchChunk)
	throughput(b, direct, fwd)
}

// throughput sends b.N chunks on each path in turn and reports both
// rates and their ratio.
func throughput(b *testing.B, direct, fwd net.Conn) {
	buf := make([]byte, 256<<10)
	// One chunk each first: TCP's and yamux's windows open, as they would
	// have in a running job.
	sendChunk(b, direct, buf, benchChunk)
	sendChunk(b, fwd, buf, benchChunk)
	var dd, fd time.Duration
	b.SetBytes(benchChunk)
	b.ResetTimer()
	for range b.N {
		dd += sendChunk(b, direct, buf, benchChunk)
		fd += sendChunk(b, fwd, buf, benchChunk)
	}
	b.StopTimer()
	mb := float64(b.N) * benchChunk / (1 << 20)
	b.ReportMetric(mb/dd.Seconds(), "direct-MiB/s")
	b.ReportMetric(mb/fd.Seconds(), "fwd-MiB/s")
	b.ReportMetric(dd.Seconds()/fd.Seconds(), "ratio")
}

// BenchmarkGangForwardLatency: one byte there and one back on a persistent
// connection, direct and forwarded, in the same run; "ratio" is the
// forwarded round trip over the direct one.
func BenchmarkGangForwardLatency(b *testing.B) {
	direct, fwd := benchPaths(b, 1)
	buf := make([]byte, 1)
	// The first round trip opens the stream: not what a running job sees.
	sendChunk(b, direct, buf, 1)
	sendChunk(b, fwd, buf, 1)
	var dd, fd time.Duration
	b.ResetTimer()
	for range b.N {
		dd += sendChunk(b, direct, buf, 1)
		fd += sendChunk(b, fwd, buf, 1)
	}
	b.StopTimer()
	b.ReportMetric(float64(dd.Microseconds())/float64(b.N), "direct-µs/rtt")
	b.ReportMetric(float64(fd.Microseconds())/float64(b.N), "fwd-µs/rtt")
	b.ReportMetric(fd.Seconds()/dd.Seconds(), "ratio")
}
