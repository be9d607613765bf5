package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/gangnet"
	"github.com/gleaner-net/gleaner/p2p"
)

// A provider node serves /gleaner/N/gang/1 (node_jobs.go): a stranger's
// stream for a gang is answered with a refusal, not left unserved, and
// the node's Stop closes its gang net.
func TestProviderServesGangStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := startTestNode(t, ctx, "1xRTX4090", Options{})
	stranger := hostileHost(t, ctx, n)
	s, err := stranger.LibP2P().NewStream(ctx, n.Host().ID(), stranger.ProtocolID(gangnet.Proto))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	if err := p2p.WriteJSON(s, gangnet.Header{Gang: "g1", From: 1, To: 0, Lease: "bafyx"}, gangnet.MaxHeader); err != nil {
		t.Fatal(err)
	}
	var rep gangnet.Reply
	if err := p2p.ReadJSON(s, gangnet.MaxReply, &rep); err != nil || rep.Code != gangnet.CodeRefused || !strings.Contains(rep.Error, "not a member") {
		t.Fatalf("stranger's gang stream: %+v, %v; want a %q refusal", rep, err, gangnet.CodeRefused)
	}
	if n.gangs == nil || n.gangs.Stats().Refused != 1 {
		t.Fatalf("the node's gang net did not count the refusal")
	}

	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	if err := n.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	solo := gangnet.Roster{Gang: "g2", Size: 1, Members: []gangnet.Member{{Rank: 0, Peer: n.Host().ID(), Lease: "lease0"}}}
	if _, err := n.gangs.Join(gangnet.ProcessLocal(solo, 0, "lease0")); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("join after the node's Stop: %v, want the gang net closed", err)
	}
}
