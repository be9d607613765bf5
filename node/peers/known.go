// Package peers is how a node finds its network and measures the peers in
// it: the known peers kept across restarts and dialled again at start
// (Known), the bootstrap list resolved and retried until one of its peers
// is reached (Bootstrapper, whose BootstrapStatus node_info shows), and
// the RTT prober the renter's auctioneer pings quoting providers with
// (Prober). It speaks libp2p and p2p.Host only; the node's database is a
// Bucket it is given, and node wires the three into its start and stop.
package peers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Known peers: the peers of this network this node was connected to, with
// their addresses and when it last saw them, kept in node.db (the Bucket
// node gives: "peers", one JSON record per peer ID). At start their addresses go into
// the peerstore before anything dials (so a renter following a job after
// its restart reaches the job's provider at once), and once the node is
// up it dials them, so that a restart reconnects without a bootstrap list.
//
// What is recorded: every peer that connects and identifies as a member
// of this network (p2p.Host.OnNetwork: libp2p has verified its key, and
// its identify lists our hello protocol), with the addresses it announces
// and the one we dialled it on, at most knownAddrsMax of them. Records
// carry their network, since --network can change it for one run of the
// same repo; a start loads only its own network's. The bucket holds at
// most knownPeersMax records: the longest unseen go first.
//
// Writes are debounced: a connection marks its peer, and the marked peers
// are written together every knownFlushEvery and once at Stop (a flood of
// connections is one transaction per interval). Every knownRefreshEvery,
// and at Stop, every connected peer is marked again, so that a peer held
// for days is not the first to be evicted.
const (
	knownPeersMax     = 200
	knownAddrsMax     = 8
	knownFlushEvery   = 10 * time.Second
	knownRefreshEvery = 5 * time.Minute
	// knownDialParallel and knownDialTimeout bound the dials at start:
	// 200 dead peers take at most 200/16 × 10 s in the background.
	knownDialParallel = 16
	knownDialTimeout  = 10 * time.Second
	// knownAddrTTL is how long restored addresses stay in the peerstore:
	// long enough for the dials at start and a renter's attaching again to
	// its jobs, short enough that stale ones do not linger (a connection's
	// identify adds the peer's current ones).
	knownAddrTTL = 10 * time.Minute
	// knownRetryFirst..knownRetryMax space the rounds of dials again while
	// the node has no peer at all (every known peer was down at start, a
	// laptop that slept): 5 s, 10 s, ... up to 5 min.
	knownRetryFirst = 5 * time.Second
	knownRetryMax   = 5 * time.Minute
	// knownDialDelay, plus up to as much again at random, is how long the
	// dials wait after the start. A peer that dials us at the same moment
	// as we dial it (a node told to connect to us right after our start,
	// or another node restarted with us) can meet our dial in one TCP
	// simultaneous open, since both dial from their listening port, and
	// then both handshakes fail; waiting a moment lets its dial land
	// first, and ours is skipped for a peer already connected.
	knownDialDelay = time.Second
)

// knownPeer is one record of the peers bucket.
type knownPeer struct {
	Network string   `json:"network"`
	Addrs   []string `json:"addrs"` // multiaddrs without /p2p/<id>, best first
	Seen    int64    `json:"seen"`  // unix seconds of the last connection or refresh
}

// Bucket is where the known peers are kept: one bucket of the node's
// database, keyed by peer ID, whose values are JSON records. View and
// Update run fn in one read or read-write transaction of it.
type Bucket interface {
	View(fn func(Tx) error) error
	Update(fn func(Tx) error) error
}

// Tx is the bucket inside one transaction (a *bbolt.Bucket is one); Put
// and Delete fail in View's.
type Tx interface {
	ForEach(fn func(key, value []byte) error) error
	Put(key, value []byte) error
	Delete(key []byte) error
}

// Known records this node's peers and dials them at start.
type Known struct {
	h   *p2p.Host // its Network() is the records' network
	st  Bucket
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex // guards marked
	marked map[peer.ID]struct{}
	// flushMu serialises flushes (the debounce loop and Stop's).
	flushMu sync.Mutex
}

// NewKnown keeps the known peers of h's network in st.
func NewKnown(h *p2p.Host, st Bucket, log *slog.Logger) *Known {
	return &Known{h: h, st: st, log: log, now: time.Now, marked: make(map[peer.ID]struct{})}
}

// Restore puts the stored addresses of this network's known peers into the
// peerstore and returns the peers, most recently seen first. (The dials
// at start take out again the addresses that fail.)
func (k *Known) Restore() ([]peer.AddrInfo, error) {
	peers, err := LoadKnown(k.st, k.h.Network())
	if err != nil {
		return nil, err
	}
	ps := k.h.LibP2P().Peerstore()
	out := peers[:0]
	for _, ai := range peers {
		if ai.ID == k.h.ID() {
			continue
		}
		ps.AddAddrs(ai.ID, ai.Addrs, knownAddrTTL)
		out = append(out, ai)
	}
	return out, nil
}

// LoadKnown reads the records of network, most recently seen first; a
// record that does not decode is skipped (and replaced by the next
// connection to that peer).
func LoadKnown(st Bucket, network string) ([]peer.AddrInfo, error) {
	type rec struct {
		ai   peer.AddrInfo
		seen int64
	}
	var recs []rec
	err := st.View(func(tx Tx) error {
		return tx.ForEach(func(key, raw []byte) error {
			var kp knownPeer
			id, err := peer.Decode(string(key))
			if err != nil || json.Unmarshal(raw, &kp) != nil || kp.Network != network {
				return nil
			}
			ai := peer.AddrInfo{ID: id}
			for _, s := range kp.Addrs {
				if m, err := ma.NewMultiaddr(s); err == nil {
					ai.Addrs = append(ai.Addrs, m)
				}
			}
			if len(ai.Addrs) > 0 {
				recs = append(recs, rec{ai, kp.Seen})
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(recs, func(a, b rec) int {
		return cmp.Or(cmp.Compare(b.seen, a.seen), cmp.Compare(a.ai.ID, b.ai.ID))
	})
	out := make([]peer.AddrInfo, len(recs))
	for i, r := range recs {
		out[i] = r.ai
	}
	return out, nil
}

// saveKnownPeers writes recs (by peer ID) in one transaction and evicts
// the longest unseen records beyond knownPeersMax, of any network.
func saveKnownPeers(st Bucket, recs map[peer.ID]knownPeer) error {
	if len(recs) == 0 {
		return nil
	}
	return st.Update(func(b Tx) error {
		for id, r := range recs {
			raw, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(id.String()), raw); err != nil {
				return err
			}
		}
		type age struct {
			key  string
			seen int64
		}
		var all []age
		if err := b.ForEach(func(k, v []byte) error {
			var kp knownPeer
			_ = json.Unmarshal(v, &kp) // undecodable: seen 0, evicted first
			all = append(all, age{string(k), kp.Seen})
			return nil
		}); err != nil {
			return err
		}
		if len(all) <= knownPeersMax {
			return nil
		}
		slices.SortFunc(all, func(a, b age) int { return cmp.Or(cmp.Compare(a.seen, b.seen), cmp.Compare(a.key, b.key)) })
		for _, a := range all[:len(all)-knownPeersMax] {
			if err := b.Delete([]byte(a.key)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Record marks the peers connected as the host reports them, until ctx
// ends, and writes the marked ones every knownFlushEvery.
func (k *Known) Record(ctx context.Context, events <-chan p2p.PeerEvent) {
	flush := time.NewTicker(knownFlushEvery)
	defer flush.Stop()
	refresh := time.NewTicker(knownRefreshEvery)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			if e.Type == "connected" {
				k.mark(e.Peer)
			}
		case <-refresh.C:
			k.markConnected()
		case <-flush.C:
			if err := k.flush(); err != nil {
				k.log.Warn("known peers not saved", "err", err)
			}
		}
	}
}

func (k *Known) mark(id peer.ID) {
	if id == k.h.ID() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// Bounded: more marked peers than the bucket keeps would be evicted
	// again in the same transaction.
	if len(k.marked) < 2*knownPeersMax {
		k.marked[id] = struct{}{}
	}
}

func (k *Known) markConnected() {
	for _, id := range k.h.LibP2P().Network().Peers() {
		k.mark(id)
	}
}

// Stop marks every connected peer and writes them: the node's Stop calls
// it while the host is still up.
func (k *Known) Stop() error {
	k.markConnected()
	return k.flush()
}

// flush writes the marked peers that are on this network and have an
// address worth dialling.
func (k *Known) flush() error {
	k.flushMu.Lock()
	defer k.flushMu.Unlock()
	k.mu.Lock()
	marked := k.marked
	k.marked = make(map[peer.ID]struct{})
	k.mu.Unlock()
	now := k.now().Unix()
	recs := make(map[peer.ID]knownPeer, len(marked))
	ps, nw := k.h.LibP2P().Peerstore(), k.h.LibP2P().Network()
	for id := range marked {
		if !k.h.OnNetwork(id) {
			if protos, _ := ps.GetProtocols(id); len(protos) == 0 && nw.Connectedness(id) == network.Connected {
				k.mark(id) // not identified yet: at the next flush
			}
			continue
		}
		if addrs := k.dialable(id); len(addrs) > 0 {
			recs[id] = knownPeer{Network: k.h.Network(), Addrs: addrs, Seen: now}
		}
	}
	return saveKnownPeers(k.st, recs)
}

// dialable is where id can be dialled again: first the addresses we
// dialled it on (known to work), then those it announces (identify), at
// most knownAddrsMax. An inbound connection's remote address is the
// peer's outgoing port, not a listener, and is left out.
func (k *Known) dialable(id peer.ID) []string {
	var cands []ma.Multiaddr
	for _, c := range k.h.LibP2P().Network().ConnsToPeer(id) {
		if c.Stat().Direction == network.DirOutbound {
			cands = append(cands, c.RemoteMultiaddr())
		}
	}
	cands = append(cands, k.h.LibP2P().Peerstore().Addrs(id)...)
	return capAddrs(id, cands)
}

// capAddrs keeps the first knownAddrsMax distinct addresses one can dial:
// without a trailing /p2p/<id>, never an unspecified IP (0.0.0.0, ::).
// Loopback and private addresses stay: a local testnet lives on them.
func capAddrs(id peer.ID, cands []ma.Multiaddr) []string {
	var out []string
	for _, m := range cands {
		if m == nil {
			continue
		}
		if t, last := ma.SplitLast(m); last != nil && last.Code() == ma.P_P2P {
			if last.Value() != id.String() {
				continue // another peer's address
			}
			m = t
		}
		if len(m) == 0 {
			continue
		}
		if ip, err := manet.ToIP(m); err == nil && ip.IsUnspecified() {
			continue
		}
		s := m.String()
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
		if len(out) == knownAddrsMax {
			break
		}
	}
	return out
}

// dial connects to peers in parallel (knownDialParallel at a time, each
// within knownDialTimeout) and returns how many are connected after it.
// now: dial even peers libp2p's dial backoff would refuse (a round of
// dials again, spaced by the caller).
func (k *Known) dial(ctx context.Context, peers []peer.AddrInfo, now bool) int {
	sem := make(chan struct{}, knownDialParallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	connected := 0
	for _, ai := range peers {
		if ctx.Err() != nil {
			break
		}
		if len(k.h.LibP2P().Network().ConnsToPeer(ai.ID)) > 0 {
			mu.Lock()
			connected++
			mu.Unlock()
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, knownDialTimeout)
			defer cancel()
			connect := k.h.Connect
			if now {
				connect = k.h.ConnectNow
			}
			if err := connect(dctx, ai); err != nil {
				if !errors.Is(err, context.Canceled) {
					k.log.Debug("known peer not reached", "peer", ai.ID, "err", err)
				}
				// Its stored addresses failed: out of the peerstore, so that
				// a renter following a job there looks the provider up in the
				// DHT instead (it does when it knows no address).
				if k.h.LibP2P().Network().Connectedness(ai.ID) != network.Connected {
					k.h.LibP2P().Peerstore().SetAddrs(ai.ID, ai.Addrs, 0)
				}
				return
			}
			mu.Lock()
			connected++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return connected
}

// Reconnect dials the known peers once the node is up, logs how many it
// reached, and dials them again, further and further apart, for as long
// as the node has no peer at all, until ctx ends.
func (k *Known) Reconnect(ctx context.Context, peers []peer.AddrInfo) {
	if len(peers) == 0 {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(knownDialDelay + rand.N(knownDialDelay)):
	}
	n := k.dial(ctx, peers, false)
	if ctx.Err() != nil {
		return
	}
	k.log.Info("reconnected to known peers", "reconnected", n, "known", len(peers))
	wait := knownRetryFirst
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if len(k.h.LibP2P().Network().Peers()) > 0 {
			wait = knownRetryFirst // connected: the DHT and discovery take it from here
			continue
		}
		wait = min(2*wait, knownRetryMax)
		// The records again (this run may have met more peers), and their
		// addresses: the restored ones may have expired meanwhile.
		if fresh, err := LoadKnown(k.st, k.h.Network()); err == nil && len(fresh) > 0 {
			peers = fresh
		}
		for _, ai := range peers {
			k.h.LibP2P().Peerstore().AddAddrs(ai.ID, ai.Addrs, knownAddrTTL)
		}
		if n := k.dial(ctx, peers, true); n > 0 {
			k.log.Info("reconnected to known peers", "reconnected", n, "known", len(peers))
		}
	}
}
