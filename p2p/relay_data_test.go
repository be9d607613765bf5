package p2p

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// TestDataOverRelaysNotifiees: a notifiee registered through the wrapper
// hears of connections (limited ones shown as unlimited), and one
// unregistered through it hears of nothing more, as a closed bitswap
// must not.
func TestDataOverRelaysNotifiees(t *testing.T) {
	a := newTestHost(t, "relaydata")
	b := newTestHost(t, "relaydata")
	c := newTestHost(t, "relaydata")
	w := DataOverRelays(a.LibP2P())
	var connects, limited atomic.Int32
	nf := &network.NotifyBundle{ConnectedF: func(n network.Network, conn network.Conn) {
		connects.Add(1)
		if conn.Stat().Limited {
			limited.Add(1)
		}
		if n != w.Network() {
			t.Error("the notifiee is handed the host's own network, not the wrapper's")
		}
	}}
	w.Network().Notify(nf)
	w.Network().Notify(nf) // twice registered is once
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Connect(ctx, info(b)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the connect event", func() bool { return connects.Load() >= 1 })
	time.Sleep(200 * time.Millisecond)
	if n := connects.Load(); n != 1 {
		t.Errorf("%d connect events for one connection", n)
	}
	if w.Network().Connectedness(b.ID()) != network.Connected {
		t.Errorf("connectedness %v", w.Network().Connectedness(b.ID()))
	}
	w.Network().StopNotify(nf)
	if err := w.Connect(ctx, info(c)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if n := connects.Load(); n != 1 {
		t.Errorf("a notifiee stopped through the wrapper heard %d connect events", n)
	}
	if limited.Load() != 0 {
		t.Error("a connection was shown as limited")
	}
}
