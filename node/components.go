package node

import (
	"context"
	"path/filepath"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
)

// component is one part of the node. Start runs the components in the
// order components lists them; each registers what Stop must do for it
// (onStop: stop taking work in; onClose: release what background work
// used), and Stop undoes them in reverse, in the three phases Stop's
// comment describes. Every goroutine a component starts runs through
// n.tasks, which Stop waits for.
type component struct {
	name  string
	start func(ctx context.Context) error
}

// components is the node's start order. A component may use only those
// above it.
func (n *Node) components() []component {
	return []component{
		{"repo lock", n.lockRepo},
		{"node.db", n.openStore},
		{"block store", func(context.Context) error { return n.startData() }},
		{"p2p host", n.startHost},
		{"block exchange", func(context.Context) error { return n.startExchange() }},
		// Before anything dials: the known peers' addresses are in the
		// peerstore when the renter follows its jobs again.
		{"known peers", n.startKnownPeers},
		{"ledger", n.startFeeds},
		{"offer book", n.startBook},
		{"offer publisher", n.startPublisher},
		{"GPUs", n.startGPUs},
		{"provider's jobs", n.startProviderJobs},
		{"renter's jobs", n.startRenterJobs},
		{"renter's services", n.startServices},
		{"counterparties", n.startCounterparties},
		// Dialled once every protocol is served, so that a peer
		// identifies the whole node.
		{"reconnect", n.startReconnect},
		{"rpc", func(context.Context) error { return n.startRPC() }},
		{"metrics", func(context.Context) error { return n.startMetrics() }},
	}
}

func (n *Node) lockRepo(context.Context) error {
	if err := n.repo.Lock(); err != nil {
		return err
	}
	n.onClose(func(context.Context) error { return n.repo.Unlock() })
	return nil
}

// openStore opens node.db. Neither database yet means a brand-new repo,
// whose identity has no feed anywhere to recover (read before OpenStore
// creates node.db).
func (n *Node) openStore(context.Context) error {
	n.newRepo = !exists(filepath.Join(n.repo.Dir, repo.StoreFile)) && !exists(filepath.Join(n.repo.Dir, repo.LedgerFile))
	st, err := store.Open(filepath.Join(n.repo.Dir, repo.StoreFile))
	if err != nil {
		return err
	}
	n.store = st
	n.onClose(func(context.Context) error { return st.Close() })
	return nil
}

// startReconnect dials the known peers of the last run, and retries the
// bootstrap list until connected.
func (n *Node) startReconnect(context.Context) error {
	known := n.knownAtStart
	n.knownAtStart = nil
	n.tasks.Go(func() { n.known.Reconnect(n.bg, known) })
	n.tasks.Go(func() { n.boot.Run(n.bg, n.host) })
	return nil
}
