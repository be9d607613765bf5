package renting

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
)

// A hostile provider floods its renter with log events while the renter's
// user follows the job slowly. The renter reads each event within
// maxEventFrame, publishes output in pieces of maxLogChunk, and drops a
// follower that falls followQueue events behind with a notice: its memory
// stays bounded whatever the provider sends.

// floodResult is what one flood did to the renter.
type floodResult struct {
	peakHeap uint64 // the renter process's peak heap in use above the start, bytes
	out      runEnd
	events   []JobEvent // what the slow follower got
}

// floodRenter starts a renter with a running job whose provider is a
// hostile host that writes count log events of size bytes each (one
// encoded frame, sent again and again, so that the attacker's own memory
// stays flat), and follows the job with a follower that reads nothing
// until the flood is over.
func floodRenter(t testing.TB, count, size int) floodResult {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, self, evil := networkedJobs(t, ctx)
	ev, err := json.Marshal(wire.Event{Type: "log", Log: []byte(strings.Repeat("x", size)), Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var frame strings.Builder
	if err := p2p.WriteFrame(&frame, ev, len(ev)); err != nil {
		t.Fatal(err)
	}
	evil.LibP2P().SetStreamHandler(evil.ProtocolID(wire.JobProto), func(s network.Stream) {
		defer s.Close()
		for range count {
			if _, err := s.Write([]byte(frame.String())); err != nil {
				return
			}
		}
	})

	id := "flooded"
	r.mu.Lock()
	r.jobs[id] = &JobRecord{ID: id, State: StateRunning}
	r.logs[id] = &jobLog{}
	r.mu.Unlock()
	slow, err := r.Follow(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	s, err := self.LibP2P().NewStream(ctx, evil.ID(), self.ProtocolID(wire.JobProto))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > base.HeapInuse && m.HeapInuse-base.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse - base.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	spec := &auction.JobSpec{}
	res := floodResult{out: r.followStream(id, spec, s, nil, "", false)}
	close(stop)
	<-sampled
	res.peakHeap = peak.Load()
	r.update(id, "", func(j *JobRecord) { j.State = StateFailed }) // ends the follower, if it is still there
	for e := range slow {
		res.events = append(res.events, e)
	}
	return res
}

// TestHostileProviderCannotFloodItsRenter: 60 log events of 8 MiB (what
// took a renter past 4 GB) are refused at the first frame; a long flood
// of events within the frame limit drops the slow follower with a notice
// instead of queueing them. Either way the renter's heap stays under
// 200 MB above where it started.
func TestHostileProviderCannotFloodItsRenter(t *testing.T) {
	const bound = 200 << 20
	big := floodRenter(t, 60, 8<<20)
	if !strings.Contains(big.out.why, "frame too large") {
		t.Errorf("8 MiB log events: the run ended %+v, want the provider dropped for an oversized frame", big.out)
	}
	if big.peakHeap > bound {
		t.Errorf("8 MiB log events: renter heap grew %d MB", big.peakHeap>>20)
	}
	many := floodRenter(t, 2000, 100<<10)
	if many.peakHeap > bound {
		t.Errorf("2000 events of 100 KiB: renter heap grew %d MB", many.peakHeap>>20)
	}
	if n := len(many.events); n == 0 || n > followQueue+1 || many.events[n-1].Type != "dropped" {
		last := JobEvent{}
		if n > 0 {
			last = many.events[n-1]
		}
		t.Errorf("the slow follower got %d events ending with %+v, want at most %d ending with a drop notice", n, last, followQueue+1)
	}
	for _, e := range many.events {
		if len(e.Log) > wire.MaxLogChunk {
			t.Fatalf("a follower got a log event of %d bytes; pieces are at most %d", len(e.Log), wire.MaxLogChunk)
		}
	}
}

// BenchmarkHostileLogFlood reports the renter's peak heap growth (MB)
// while a hostile provider sends 60 log events of 8 MiB, and then 2000 of
// 100 KiB, to a job whose follower reads nothing.
func BenchmarkHostileLogFlood(b *testing.B) {
	var big, many uint64
	for range b.N {
		big = max(big, floodRenter(b, 60, 8<<20).peakHeap)
		many = max(many, floodRenter(b, 2000, 100<<10).peakHeap)
	}
	b.ReportMetric(float64(big)/(1<<20), "MB-peak-8MiB-events")
	b.ReportMetric(float64(many)/(1<<20), "MB-peak-100KiB-events")
}
