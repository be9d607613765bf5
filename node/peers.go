package node

import (
	"context"

	"github.com/gleaner-net/gleaner/node/peers"
	"github.com/gleaner-net/gleaner/node/store"
	bolt "go.etcd.io/bbolt"
)

// startKnownPeers puts the known peers' addresses in the peerstore,
// starts recording the peers that connect, and keeps the peers to dial
// once the node is up (startReconnect). A store that cannot be read costs
// the reconnection only: the node starts from its bootstrap list.
func (n *Node) startKnownPeers(context.Context) error {
	k := peers.NewKnown(n.host, peersBucket{n.store}, n.log.With("part", "peers"))
	n.known = k
	known, err := k.Restore()
	if err != nil {
		n.log.Warn("known peers not read; only the bootstrap list is dialled", "err", err)
	}
	if events, err := n.host.SubscribePeerEvents(n.bg); err == nil {
		n.tasks.Go(func() { k.Record(n.bg, events) })
	}
	// The last step of Stop's first phase: the host is still up.
	n.onStop(func(context.Context) error {
		if err := k.Stop(); err != nil {
			n.log.Warn("known peers not saved", "err", err)
		}
		return nil
	})
	n.knownAtStart = known
	return nil
}

// peersBucket is node.db's peers bucket, where node/peers keeps the known
// peers.
type peersBucket struct{ st *store.Store }

func (b peersBucket) View(fn func(peers.Tx) error) error {
	return b.st.ViewBucket(store.BucketPeers, func(bk *bolt.Bucket) error { return fn(bk) })
}

func (b peersBucket) Update(fn func(peers.Tx) error) error {
	return b.st.UpdateBucket(store.BucketPeers, func(bk *bolt.Bucket) error { return fn(bk) })
}

func (n *Node) bootStatus() *peers.BootstrapStatus {
	if n.boot == nil {
		return nil
	}
	return n.boot.Status()
}
