package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/journal"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/repo"
)

// startBook starts the renter's offer book, which reads the offer topics
// and the DHT.
func (n *Node) startBook(context.Context) error {
	n.market = offers.NewMarket(n.host, n.cfg.Market.MaxOffers, n.cfg.Market.Continents, n.log.With("part", "market"))
	return n.market.Start(n.bg)
}

// startPublisher starts the provider's offer publisher on the book's
// topics. Stop's first phase withdraws its offer.
func (n *Node) startPublisher(context.Context) error {
	key, err := n.repo.Identity()
	if err != nil {
		return err
	}
	p, err := newProvider(n.bg, n.market, n.store, key, n.opts.OfferTTL, n.log.With("part", "provider"))
	if err != nil {
		return err
	}
	n.provider = p
	n.host.LibP2P().SetStreamHandler(n.host.ProtocolID(offers.StreamProto), offers.ServeOffer(p.CurrentRaw))
	n.onStop(func(ctx context.Context) error {
		// Withdraw publishes only over a live offer; a node that offered
		// nothing (a renter) has nothing to flush and stops at once.
		offered := p.Current() != nil
		p.Withdraw(ctx)
		// Gossip sends from its own queues: closing the host at once
		// would drop the withdrawal, and renters would keep the offer of
		// a stopped provider until it expires.
		if offered && len(n.host.LibP2P().Network().Peers()) > 0 {
			select {
			case <-time.After(withdrawalFlush):
			case <-ctx.Done():
			}
		}
		return nil
	})
	return nil
}

// startGPUs opens the GPUs this node sells, if any, with the monitor that
// publishes their availability, then runs the publisher: its first offer
// goes out with the first availability, not before.
func (n *Node) startGPUs(context.Context) error {
	ctx, p := n.bg, n.provider
	src, err := n.openGPUs()
	if err != nil {
		p.SetGPUError(err)
		n.log.Info("this node can rent GPUs but has none to sell", "why", err)
	} else {
		n.gpus = src
		n.onClose(func(context.Context) error { return src.Close() })
		n.claims = &providing.Claimer{Ledger: n.ledger, Self: n.host.ID().String(), Append: n.feeds.Append,
			Log: n.log, MinGap: providing.ClaimGap}
		n.claims.Start(ctx, src)
		// The executor, made by the provider's jobs, tells the monitor
		// which processes are jobs' (providing.OwnJobs); until then none is.
		n.ownJobs.Log = n.log.With("part", "gpu-monitor")
		mon := attest.NewMonitor(src, p.Limits, n.ownJobs.Processes, n.opts.GPUMonitorInterval) // 0: the default
		n.gpuMon = mon
		if a, _ := mon.Check(ctx); a.Err == "" {
			p.SetAvailability(a) // publish the first offer without waiting a poll
		}
		n.tasks.Go(func() { _ = mon.Run(ctx, p.SetAvailability) })
	}
	n.tasks.Go(func() { p.Run(ctx) })
	// Offered GPU-time is recorded from the publisher's start: the fill
	// rate's denominator (earnings_offered.go).
	n.tasks.Go(func() { n.recordOffered(ctx) })
	return nil
}

// withdrawalFlush is how long a stopping node gives gossip to send its
// offer's withdrawal before the host closes.
const withdrawalFlush = 500 * time.Millisecond

// openGPUs picks the GPU source: the one Options give (tests), simulated
// when configured, NVML otherwise.
func (n *Node) openGPUs() (attest.Source, error) {
	if n.opts.GPUSource != nil {
		return n.opts.GPUSource, nil
	}
	if spec := n.cfg.Provider.SimulateGPUs; spec != "" {
		id, err := n.repo.PeerID()
		if err != nil {
			return nil, err
		}
		s, err := attest.NewSimulatedSeed(spec, id.String())
		if err != nil {
			return nil, fmt.Errorf("provider.simulate_gpus: %w", err)
		}
		n.log.Warn("using SIMULATED GPUs: offers are labelled simulated and no real work can run on them", "spec", spec)
		return s, nil
	}
	src, err := attest.NewNVML()
	if errors.Is(err, attest.ErrNoGPU) {
		return nil, fmt.Errorf("%v (on a machine without a GPU, --simulate-gpus 1xRTX4090 gives labelled stand-ins)", err)
	}
	return src, err
}

// startFeeds opens the ledger (its own bbolt file, <repo>/ledger.db),
// joins its replication and starts the journal that appends to it.
func (n *Node) startFeeds(context.Context) error {
	ctx := n.bg
	st, err := ledger.OpenStore(filepath.Join(n.repo.Dir, repo.LedgerFile))
	if err != nil {
		return err
	}
	st.CheckPayloads(checkPayload)
	n.ledger = st
	n.onClose(func(context.Context) error { return st.Close() })
	key, err := n.repo.Identity()
	if err != nil {
		return err
	}
	n.feeds = newFeeds(n.host, st, key, n.log.With("part", "ledger"))
	// A repo that ran before but has no own feed now (ledger.db moved
	// aside) recovers it from peers before appending: a feed begun again
	// at sequence 1 would fork it. The journal's queue holds what waits.
	n.feeds.Recovery.Await = !n.newRepo
	// Closed after every producer has stopped and before ledger.db: what
	// was queued is appended, not lost.
	n.journal = journal.New(n.feeds.Append, n.log.With("part", "journal"), journal.DefaultQueue, journal.DefaultWait)
	n.onClose(n.journal.Close)
	// Stopped (its goroutines waited for) before the journal drains and
	// ledger.db closes.
	n.onClose(n.feeds.Stop)
	return n.feeds.Start(ctx)
}
