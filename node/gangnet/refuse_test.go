package gangnet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A gang stream is refused, with a code, from a peer the roster does not
// name, for a gang the peer is not a member of (though it is of another
// here), with a lease or ranks the local roster disagrees with, and with a
// header that is not one. Nothing reaches the container.
func TestGangStreamRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rig := newGangRig(t, ctx, "alpha", 2, testLimits())
	cs, _ := rig.join(t)
	p0, p1 := rig.provs[0], rig.provs[1]

	// A second gang on provider 0 whose other member is a third provider,
	// not provider 1.
	p2 := newProvider(t, ctx, testLimits())
	connect(t, ctx, p2.h, p0.h)
	beta := Roster{Gang: "beta", Size: 2, Members: []Member{
		{Rank: 0, Peer: p0.h.ID(), Lease: "betalease0"}, {Rank: 1, Peer: p2.h.ID(), Lease: "betalease1"}}}
	if _, err := p0.net.Join(Local{Roster: beta, Rank: 0, Lease: "betalease0", ListenIP: loopback, Container: At(cs[0].addr)}); err != nil {
		t.Fatal(err)
	}
	stranger := bareHost(t, ctx)
	connect(t, ctx, stranger, p0.h)

	for _, tc := range []struct {
		name string
		from *provider
		hd   Header
		want string // in the refusal's message
	}{
		{"stranger", &provider{h: stranger}, Header{Gang: "alpha", From: 1, To: 0, Lease: "lease1"}, "not a member"},
		{"member of another gang", p1, Header{Gang: "beta", From: 1, To: 0, Lease: "betalease1"}, "not a member"},
		{"no such gang", p1, Header{Gang: "gamma", From: 1, To: 0, Lease: "lease1"}, "not a member"},
		{"wrong lease", p1, Header{Gang: "alpha", From: 1, To: 0, Lease: "lease9"}, "knows peer"},
		{"wrong sender rank", p2, Header{Gang: "beta", From: 0, To: 1, Lease: "betalease0"}, "knows peer"},
	} {
		_, err := rawStream(ctx, tc.from.h, p0.h.ID(), tc.hd)
		var re *RefusedError
		if !errors.As(err, &re) || re.Code != CodeRefused || !strings.Contains(re.Message, tc.want) {
			t.Errorf("%s: %v, want a %q refusal saying %q", tc.name, err, CodeRefused, tc.want)
		}
	}

	s, err := stranger.LibP2P().NewStream(ctx, p0.h.ID(), stranger.ProtocolID(Proto))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Write([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}) // a frame far past MaxHeader
	var rep Reply
	if err := readReply(s, &rep); err != nil || rep.Code != CodeMalformed {
		t.Errorf("oversized header: %+v, %v", rep, err)
	}
	if got := cs[0].received(); len(got) != 0 {
		t.Errorf("container 0 received %v from refused streams", got)
	}
	if st := p0.net.Stats(); st.Refused != 6 || st.Inbound != 0 {
		t.Errorf("provider 0 counted %+v, want 6 refusals and no stream open", st)
	}
}

// A member's provider that opens more streams than PerPeer at once is
// told busy; the streams already open go on.
func TestGangStreamPerPeerCap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lim := testLimits()
	lim.PerPeer = 2
	rig := newGangRig(t, ctx, "capped", 2, lim)
	rig.join(t)
	p0, p1 := rig.provs[0], rig.provs[1]
	hd := Header{Gang: "capped", From: 1, To: 0, Lease: "lease1"}
	for i := range lim.PerPeer {
		s, err := rawStream(ctx, p1.h, p0.h.ID(), hd)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		defer s.Close()
	}
	_, err := rawStream(ctx, p1.h, p0.h.ID(), hd)
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != CodeBusy {
		t.Fatalf("stream past the cap: %v, want %q", err, CodeBusy)
	}
	if st := p0.net.Stats(); st.Inbound != lim.PerPeer {
		t.Fatalf("open inbound %d, want %d", st.Inbound, lim.PerPeer)
	}
}
