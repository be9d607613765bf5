package node

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	ma "github.com/multiformats/go-multiaddr"
)

// TestOwnerLimitsWithdrawAndRestoreGPUs drives a real provider (real host,
// store, market and monitor) with simulated GPUs whose load the test
// controls: a GPU over the owner's temperature limit, or busy with the
// owner's own process, leaves the signed offer at once, and comes back
// when idle again.
func TestOwnerLimitsWithdrawAndRestoreGPUs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	h, err := p2p.New(ctx, p2p.Identity(key), p2p.Network("local"), p2p.DisableNATServices(),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := offers.NewMarket(h, 100, []string{"eu"}, log)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(ctx, m, st, key, time.Minute, log)
	if err != nil {
		t.Fatal(err)
	}
	region, price, maxTemp := "eu/DE", "0.5", 85
	if _, err := p.Update(offers.Patch{Region: &region, PriceBronze: &price, MaxTempC: &maxTemp}.Apply); err != nil {
		t.Fatal(err)
	}
	sim, err := attest.NewSimulatedSeed("2xRTX4090", h.ID().String())
	if err != nil {
		t.Fatal(err)
	}
	mon := attest.NewMonitor(sim, p.Limits, nil, 20*time.Millisecond)
	go func() { _ = mon.Run(ctx, p.SetAvailability) }()
	go p.Run(ctx)

	gpusInBook := func() int {
		o, _, ok := m.Book().Get(h.ID().String())
		if !ok {
			return 0
		}
		return len(o.GPUs)
	}
	waitFor := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for gpusInBook() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the book shows %d GPUs, want %d", what, gpusInBook(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("both GPUs idle", 2)

	if err := sim.SetLoad(0, 91, 300, nil); err != nil {
		t.Fatal(err)
	}
	waitFor("GPU 0 at 91°C over an 85°C limit", 1)
	res, _ := offerAPI{&Node{provider: p}}.Show(ctx, struct{}{})
	if res.GPUs[0].Withdrawn == "" || res.GPUs[1].Withdrawn != "" {
		t.Fatalf("offer_show does not say which GPU was withdrawn: %+v", res.GPUs)
	}

	// The owner starts their own work on GPU 1: not a gleaner job.
	if err := sim.SetLoad(1, 50, 120, []attest.Process{{PID: 4242, UsedMiB: 2048, Name: "blender"}}); err != nil {
		t.Fatal(err)
	}
	waitFor("no GPU left: a signed withdrawal", 0)
	if _, _, ok := m.Book().Get(h.ID().String()); ok {
		t.Fatal("the withdrawn offer is still in the book")
	}

	if err := sim.Idle(0); err != nil {
		t.Fatal(err)
	}
	if err := sim.Idle(1); err != nil {
		t.Fatal(err)
	}
	waitFor("both GPUs idle again", 2)
}

func TestOfferSettingsPersistAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), repo.StoreFile)
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := (offerStore{st}).SaveState(offers.State{Settings: offers.DefaultSettings(), Seq: 41}); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(context.Background(), nil, st, nil, time.Minute, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	region, price := "na/US", "1.25"
	if _, err := p.Update(offers.Patch{Region: &region, PriceSilver: &price}.Apply); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p2, err := newProvider(context.Background(), nil, st, nil, time.Minute, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if s := p2.Settings(); s.Region.Country != "US" || s.Prices.Silver != 1_250_000 || p2.Seq() != 41 {
		t.Fatalf("after reopen: settings %+v seq %d", s, p2.Seq())
	}
}
