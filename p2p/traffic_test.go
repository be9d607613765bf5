package p2p

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

func protoBytes(h *Host, p string) (ProtocolBytes, bool) {
	for _, b := range h.StreamTraffic() {
		if b.Protocol == p {
			return b, true
		}
	}
	return ProtocolBytes{}, false
}

func topicCountsOf(h *Host, topic string) TopicMessages {
	for _, m := range h.GossipTraffic() {
		if m.Topic == topic {
			return m
		}
	}
	return TopicMessages{Topic: topic}
}

// Real bytes over a real TCP connection between two hosts move the
// protocol's counters on both sides, in the right directions.
func TestTrafficCountsStreamBytesByProtocol(t *testing.T) {
	a, b := newTestHost(t, "traffic"), newTestHost(t, "traffic")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	echo := b.ProtocolID("echo/1")
	b.LibP2P().SetStreamHandler(echo, func(s network.Stream) {
		defer s.Close()
		_, _ = io.Copy(s, s)
	})
	if err := a.Connect(ctx, info(b)); err != nil {
		t.Fatal(err)
	}
	s, err := a.LibP2P().NewStream(ctx, b.ID(), echo)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64 << 10
	if _, err := s.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseWrite()
	got, err := io.ReadAll(s)
	if err != nil || len(got) != n {
		t.Fatalf("echo: %d bytes, %v", len(got), err)
	}
	_ = s.Close()
	ab, ok := protoBytes(a, string(echo))
	if !ok || ab.Out < n || ab.In < n {
		t.Errorf("A's %s = %+v (%v), want >= %d each way", echo, ab, ok, n)
	}
	eventually(t, 5*time.Second, "B counts the echo", func() bool {
		bb, _ := protoBytes(b, string(echo))
		return bb.In >= n && bb.Out >= n
	})
	// Identify ran on the connection: libp2p's own protocols get labels.
	if id, ok := protoBytes(a, "/ipfs/id/1.0.0"); !ok || id.In == 0 {
		t.Errorf("no identify bytes on A: %+v %v", id, ok)
	}
}

// A peer asking for protocols this node does not speak moves bytes (the
// negotiation) but creates no label: they are counted as unnegotiated.
func TestTrafficUnknownProtocolMakesNoLabel(t *testing.T) {
	a, b := newTestHost(t, "traffic"), newTestHost(t, "traffic")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Connect(ctx, info(b)); err != nil {
		t.Fatal(err)
	}
	before, _ := protoBytes(b, Unnegotiated)
	bogus := []protocol.ID{"/evil/1.0.0", a.ProtocolID("no-such/1"), "/ipfs/made-up/9"}
	for _, p := range bogus {
		s, err := a.LibP2P().NewStream(ctx, b.ID(), p)
		if err == nil {
			_ = s.Reset()
			t.Fatalf("B accepted %s", p)
		}
	}
	eventually(t, 5*time.Second, "B counts the negotiation", func() bool {
		after, _ := protoBytes(b, Unnegotiated)
		return after.In > before.In
	})
	for _, h := range []*Host{a, b} {
		for _, p := range bogus {
			if _, ok := protoBytes(h, string(p)); ok {
				t.Errorf("%s got a label for %s", h.ID(), p)
			}
		}
	}
}

// Whatever protocol IDs reach the reporter, at most maxTrafficLabels get
// labels; foreign ones never do.
func TestTrafficLabelsBounded(t *testing.T) {
	c := newStreamCounter("traffic")
	for i := range 1000 {
		c.LogRecvMessageStream(1, protocol.ID(fmt.Sprintf("/gleaner/traffic/p%d/1", i)), "")
		c.LogRecvMessageStream(1, protocol.ID(fmt.Sprintf("/other-net/p%d/1", i)), "")
	}
	snap := c.snapshot()
	if len(snap) != maxTrafficLabels+2 { // + unnegotiated, other
		t.Fatalf("%d labels, want %d", len(snap), maxTrafficLabels+2)
	}
	var total uint64
	for _, b := range snap {
		total += b.In
		if b.Protocol == OtherLabel && b.In != 2000-maxTrafficLabels {
			t.Errorf("other = %d, want %d", b.In, 2000-maxTrafficLabels)
		}
	}
	if total != 2000 {
		t.Errorf("%d bytes counted, want 2000", total)
	}
}

// A message published by A is received and delivered at B; one that B's
// validator rejects is counted as rejected; a topic B never joined gets no
// label at B.
func TestTrafficCountsGossipMessages(t *testing.T) {
	a, b := newTestHost(t, "traffic"), newTestHost(t, "traffic")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Connect(ctx, info(b)); err != nil {
		t.Fatal(err)
	}
	ta, err := a.Join("t/1", nil, 0) // A validates nothing, so B's validator decides
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.Join("t/1", rejectBad, 0)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := tb.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ta.Subscribe(); err != nil {
		t.Fatal(err)
	}
	topic := a.TopicName("t/1")
	eventually(t, 10*time.Second, "topic peers", func() bool { return len(a.PubSub().ListPeers(topic)) == 1 })
	for _, m := range []string{"bad-1", "good-1"} {
		if err := ta.Publish(ctx, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := sub.Next(ctx); err != nil || string(m.Data) != "good-1" {
		t.Fatalf("B's subscriber: %v, %v", m, err)
	}
	eventually(t, 5*time.Second, "B's counts", func() bool {
		c := topicCountsOf(b, topic).Counts
		return c[GossipReceived] == 2 && c[GossipDelivered] == 1 && c[GossipRejected] == 1
	})
	ca, cb := topicCountsOf(a, topic).Counts, topicCountsOf(b, topic).Counts
	if ca[GossipPublished] != 2 || ca[GossipReceived] != 0 {
		t.Errorf("A's counts %v: want 2 published, none received", ca)
	}
	if cb[GossipPublished] != 0 || cb[GossipIgnored] != 0 {
		t.Errorf("B's counts %v", cb)
	}
	// A joins a topic B never joined: B makes no label for it.
	tx, err := a.Join("t/2", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Publish(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for _, m := range b.GossipTraffic() {
		if m.Topic == a.TopicName("t/2") {
			t.Errorf("B labelled a topic it never joined: %+v", m)
		}
	}
}
