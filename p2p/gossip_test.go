package p2p

import (
	"bytes"
	"context"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

func rejectBad(_ context.Context, _ peer.ID, m *pubsub.Message) pubsub.ValidationResult {
	if bytes.HasPrefix(m.Data, []byte("bad")) {
		return pubsub.ValidationReject
	}
	return pubsub.ValidationAccept
}

// A line A-B-C (no A-C link, so A cannot reach C directly): A publishes an
// invalid message that B's validator rejects. It must reach neither B's
// subscriber nor C, and B must score A down.
func TestValidatorStopsInvalidAndScoresSender(t *testing.T) {
	mn, hs := newMockHosts(t, 3, 0)
	a, b, c := hs[0], hs[1], hs[2]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pair := range [][2]*Host{{a, b}, {b, c}} {
		if _, err := mn.LinkPeers(pair[0].ID(), pair[1].ID()); err != nil {
			t.Fatal(err)
		}
		if err := pair[0].Connect(ctx, info(pair[1])); err != nil {
			t.Fatal(err)
		}
	}
	ta, err := a.Join("v/1", nil, 0) // the attacker validates nothing
	if err != nil {
		t.Fatal(err)
	}
	subs := map[*Host]*pubsub.Subscription{}
	for _, h := range []*Host{b, c} {
		tp, err := h.Join("v/1", rejectBad, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if subs[h], err = tp.Subscribe(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ta.Subscribe(); err != nil {
		t.Fatal(err)
	}
	topic := a.TopicName("v/1")
	eventually(t, 10*time.Second, "topic peers", func() bool {
		return len(b.PubSub().ListPeers(topic)) == 2 && len(c.PubSub().ListPeers(topic)) == 1
	})
	time.Sleep(1500 * time.Millisecond) // one heartbeat to build meshes
	for _, m := range []string{"bad-1", "bad-2", string(make([]byte, 2000)), "good-1"} {
		if err := ta.Publish(ctx, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for h, s := range subs {
		m, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != "good-1" {
			t.Fatalf("%s received %q before good-1", h.ID(), m.Data)
		}
	}
	eventually(t, 5*time.Second, "B scores A negative", func() bool {
		return b.PeerScores()[a.ID()] < -100
	})
	if s := c.PeerScores()[b.ID()]; s < 0 {
		t.Errorf("C penalised honest relay B: %v", s)
	}
}
