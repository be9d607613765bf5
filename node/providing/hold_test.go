package providing

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/wire"
)

// overWire sends req on an in-memory /auction/1 stream from the peer
// from and returns the reply; a release is answered by the close alone,
// which ok=false reports.
func (r *rig) overWire(from string, req wire.QuoteRequest) (rep wire.QuoteReply, ok bool) {
	r.t.Helper()
	mine, theirs := net.Pipe()
	defer mine.Close()
	done := make(chan struct{})
	go func() { defer close(done); r.pj.serveQuote(pipeEnd{theirs}, from) }()
	_ = mine.SetDeadline(time.Now().Add(5 * time.Second))
	if err := wire.Write(mine, req); err != nil {
		r.t.Fatal(err)
	}
	err := wire.Read(mine, wire.MaxEventFrame, &rep)
	<-done
	if err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, io.ErrUnexpectedEOF) {
			r.t.Fatalf("reading the reply: %v", err)
		}
		return rep, false
	}
	return rep, true
}

// A quote over the wire holds the GPU it names for the peer that asked:
// another renter's quote is declined as held; a release from any other
// peer, or with another round's nonce, is ignored; the asking peer's
// release frees the GPU at once, and nothing is answered to a release.
func TestQuoteHoldReleaseOverTheWire(t *testing.T) {
	r := newRig(t, 1)
	defer r.stop()
	a, b := r.renter(), r.renter()
	nonce := []byte("round one")
	rep, ok := r.overWire(a.id, wire.QuoteRequest{JobID: "a-job", Nonce: nonce, Spec: spec("a", auction.Silver)})
	if !ok || rep.Decline != "" || len(rep.Bid) == 0 {
		t.Fatalf("a's quote: %+v", rep)
	}
	other := wire.QuoteRequest{JobID: "b-job", Nonce: []byte("b's round"), Spec: spec("b", auction.Silver)}
	if rep, _ := r.overWire(b.id, other); rep.Decline != auction.ReasonHeld {
		t.Fatalf("b's quote while a's lives: %+v, want declined as held", rep)
	}
	for _, c := range []struct {
		from  string
		nonce []byte
	}{{b.id, nonce}, {a.id, []byte("another round")}} {
		if rep, ok := r.overWire(c.from, wire.QuoteRequest{JobID: "a-job", Nonce: c.nonce, Release: true}); ok {
			t.Fatalf("a release was answered: %+v", rep)
		}
		if rep, _ := r.overWire(b.id, other); rep.Decline != auction.ReasonHeld {
			t.Fatalf("after a release from %s with nonce %q: b's quote %+v, want a's hold kept", c.from[:12], c.nonce, rep)
		}
	}
	if _, ok := r.overWire(a.id, wire.QuoteRequest{JobID: "a-job", Nonce: nonce, Release: true}); ok {
		t.Fatal("a's release was answered")
	}
	if rep, _ := r.overWire(b.id, other); rep.Decline != "" || len(rep.Bid) == 0 {
		t.Fatalf("b's quote after a's release: %+v, want a bid", rep)
	}
	// b's quote now holds the GPU: a's next round is declined, and b's
	// award (a re-quote of its job replaces its hold) goes through.
	if _, err := a.tryLease("a-job", spec("a", auction.Silver)); err == nil || err.Error() != "declined: "+auction.ReasonHeld {
		t.Fatalf("a's next round: %v, want declined as held", err)
	}
	b.lease("b-job", spec("b", auction.Silver))
}
