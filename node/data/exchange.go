package data

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/p2p"
	"github.com/ipfs/boxo/bitswap"
	"github.com/ipfs/boxo/bitswap/client"
	"github.com/ipfs/boxo/bitswap/client/traceability"
	bsmsg "github.com/ipfs/boxo/bitswap/message"
	"github.com/ipfs/boxo/bitswap/network"
	bsnet "github.com/ipfs/boxo/bitswap/network/bsnet"
	"github.com/ipfs/boxo/exchange"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/verifcid"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/core/routing"
	"github.com/multiformats/go-multihash"
)

// ErrNotFound is wrapped by a Fetch that ended, at its context's deadline
// or cancellation, without some block of the DAG: no peer it could reach
// served it. The error names the missing CID.
var ErrNotFound = errors.New("no peer could serve the block")

// ErrExchangeClosed is returned by a Fetch or Provide on a closed Exchange.
var ErrExchangeClosed = errors.New("data exchange closed")

// Server-side bounds that apply when ExchangeConfig leaves them zero.
const (
	// DefaultMaxOutstandingBytesPerPeer is how many bytes of blocks the
	// server prepares for one peer before that peer has taken them: two of
	// the largest blocks, so a MaxBlockBytes block can always be queued
	// while the one before it is on the wire. More buys throughput on long
	// links at the cost of memory per connected peer (8 MiB measured no
	// faster over loopback on two cores, and held more heap).
	DefaultMaxOutstandingBytesPerPeer = 2 * MaxBlockBytes
	// DefaultMaxQueuedWantsPerPeer is how many wantlist entries the server
	// keeps for one peer; the rest are dropped. A gleaner fetcher never
	// has more than fetchWindow wants out, so this is generous for honest
	// peers and bounds the memory a hostile one can make us hold.
	DefaultMaxQueuedWantsPerPeer = 4 * fetchWindow
	// DefaultTaskWorkers is how many goroutines send blocks to peers, in
	// all: the bound on concurrent outgoing messages, on every core count.
	DefaultTaskWorkers = 8
	// DefaultBlockstoreWorkers is how many goroutines read the store for
	// peers' wants, in all (boxo's default is 128, far more concurrent
	// leveldb reads than a provider's disk and two cores profit from).
	DefaultBlockstoreWorkers = 16
)

// fetchWindow is how many blocks a Fetch wants at once: enough to keep
// several peers busy (256 KiB chunks, so up to 32 MiB in flight), small
// enough that the blocks received but not yet written stay bounded.
const fetchWindow = 128

// rewantStall is how long a fetch that redialled a source waits for a
// block before it wants its missing blocks again (redial.go): far less
// than bitswap's own rebroadcast (30 to 45 s), far more than a block
// takes to cross a relay.
const rewantStall = 3 * time.Second

// putBatch is how many received blocks one store write takes at most
// (8 MiB of 256 KiB chunks): each write costs one filesystem sync
// (putSettled), so a sync is paid per batch, not per block.
const putBatch = 32

// maxUnwritten is how many bytes of received blocks a fetch lets wait
// for its writer before it takes no more from bitswap: three batches of
// chunks. Counted in bytes as well as blocks, so that a DAG of 2 MiB
// blocks hands its writer no more bytes than one of chunks. (What bitswap
// has received and the walk not yet taken, up to putBatch blocks, and
// the blocks wanted, are bounded in blocks: fetchWindow.)
const maxUnwritten = 3 * putBatch * ChunkSize

// ExchangeConfig is what NewExchange needs.
type ExchangeConfig struct {
	// Host is the node's libp2p host.
	Host host.Host
	// ProtocolPrefix namespaces the bitswap protocols (bsnet.Prefix), e.g.
	// "/gleaner/testnet": nodes of different gleaner networks, and IPFS
	// nodes, do not exchange blocks with each other. Required.
	ProtocolPrefix protocol.ID
	// Router finds providers of a block (the DHT) and announces ours. Nil
	// (tests) means only connected peers are asked and Provide does
	// nothing.
	Router routing.ContentRouting
	// Store is where fetched blocks go and served blocks come from.
	Store *Store
	// Log receives warnings about misbehaving peers; nil is slog.Default().
	Log *slog.Logger
	// OnBadPeer is called (from bitswap's receive path; it must not block)
	// when a peer has sent BadBlockStrikes blocks nobody asked for: the
	// node disconnects it and holds it off. Nil: only logged.
	OnBadPeer func(peer.ID)
	// Allow, when set, decides which peer may be sent which block
	// (Access.Allow): a refused want is answered as a block this node does
	// not have. Nil serves every block to every peer.
	Allow func(peer.ID, cid.Cid) bool

	// Server bounds; zero means the Default* constants above.
	MaxOutstandingBytesPerPeer int  // bytes prepared for one peer and not yet sent
	MaxQueuedWantsPerPeer      uint // wantlist entries kept for one peer
	TaskWorkers                int  // goroutines sending blocks, in all
	BlockstoreWorkers          int  // goroutines reading the store for peers, in all
}

// Exchange fetches DAGs from peers into a Store and serves the Store's
// blocks to peers, over bitswap.
type Exchange struct {
	bs     *bitswap.Bitswap
	host   host.Host
	protos []protocol.ID
	prefix protocol.ID // the network's, for the access question (refusal.go)
	router routing.ContentRouting
	store  *Store
	log    *slog.Logger

	mu     sync.Mutex
	closed bool
	// wanted counts, by CID key, the active fetches that want or have
	// wanted a block, so that a received block none of them asked for
	// (what a peer sending wrong bytes under a CID produces) is told apart
	// from a late duplicate.
	wanted map[string]int
	// strikes counts, by peer, the unasked-for blocks each sent since its
	// last report (strike); bounded by maxStruck.
	strikes   map[peer.ID]int
	onBadPeer func(peer.ID)
	// recent: blocks no fetch wants any more, by key, and when they stopped
	// being wanted (rememberWanted); guarded by mu.
	recent map[string]time.Time

	// noRewant turns off the re-want after a redial (redial.go), for the
	// tests and the benchmark that measure what it saves; set before any
	// Fetch.
	noRewant bool
	// rewants counts the re-wants sent after redials, for the tests.
	rewants atomic.Int64
	// restarts counts the failed fetches whose wants outlived their
	// sessions (withdraw.go), for the tests.
	restarts atomic.Int64
	// handed counts the blocks fetches have handed to their writers, for
	// the tests.
	handed atomic.Int64
}

// NewExchange starts bitswap on cfg.Host. ctx bounds bitswap's background
// work; Close stops it.
func NewExchange(ctx context.Context, cfg ExchangeConfig) (*Exchange, error) {
	if cfg.Host == nil || cfg.Store == nil {
		return nil, errors.New("data exchange: a host and a store are required")
	}
	if cfg.ProtocolPrefix == "" {
		return nil, errors.New("data exchange: a protocol prefix is required, so that gleaner networks do not exchange with IPFS or each other")
	}
	x := &Exchange{
		host:   cfg.Host,
		prefix: cfg.ProtocolPrefix,
		router: cfg.Router,
		store:  cfg.Store,
		log:    cfg.Log,
		wanted: map[string]int{},

		onBadPeer: cfg.OnBadPeer,
		recent:    map[string]time.Time{},
	}
	if x.log == nil {
		x.log = slog.Default()
	}
	for _, p := range []protocol.ID{bsnet.ProtocolBitswap, bsnet.ProtocolBitswapOneOne, bsnet.ProtocolBitswapOneZero, bsnet.ProtocolBitswapNoVers} {
		x.protos = append(x.protos, cfg.ProtocolPrefix+p)
	}
	opts := []bitswap.Option{
		bitswap.MaxOutstandingBytesPerPeer(orDefault(cfg.MaxOutstandingBytesPerPeer, DefaultMaxOutstandingBytesPerPeer)),
		bitswap.MaxQueuedWantlistEntriesPerPeer(orDefault(cfg.MaxQueuedWantsPerPeer, DefaultMaxQueuedWantsPerPeer)),
		bitswap.TaskWorkerCount(orDefault(cfg.TaskWorkers, DefaultTaskWorkers)),
		bitswap.EngineTaskWorkerCount(orDefault(cfg.TaskWorkers, DefaultTaskWorkers)),
		bitswap.EngineBlockstoreWorkerCount(orDefault(cfg.BlockstoreWorkers, DefaultBlockstoreWorkers)),
		// The duplicate-block statistics ask the store Has for every
		// received block, in a goroutine each; nothing here reads them,
		// and the fetch checks what it stores anyway.
		bitswap.WithoutDuplicatedBlockStats(),
		// DONT_HAVE answers let a fetcher move on from a peer at once
		// instead of at a timeout (boxo's default; stated, not assumed).
		bitswap.SetSendDontHaves(true),
		// Blocks arrive with the peer that sent them: FetchResult.Peers.
		bitswap.WithClientOption(client.WithTraceBlock(true)),
		// Sees every received message, for the unrequested-block warning.
		bitswap.WithTracer(unrequestedTracer{x}),
	}
	if cfg.Allow != nil {
		opts = append(opts, bitswap.WithPeerBlockRequestFilter(cfg.Allow))
	}
	// Bitswap in boxo v0.41 announces nothing by itself (providing moved
	// out of it), so what is announced is exactly what Provide is given.
	var finder routing.ContentDiscovery // an untyped nil unless there is a router
	if cfg.Router != nil {
		finder = cfg.Router
	}
	evm := network.NewConnectEventManager()
	// Bitswap allocates a message's declared length (up to 4 MiB) as soon
	// as it has read its prefix; the metered host charges it to the
	// sending peer's memory budget first (p2p/meter.go). It would keep
	// off relayed connections, the only path between a renter and a
	// provider both behind NATs that hole punching cannot cross; the
	// host it is given lets it use them (p2p/relay_data.go).
	net := bsnet.NewFromIpfsHost(p2p.MeteredHost(p2p.DataOverRelays(cfg.Host)), bsnet.Prefix(cfg.ProtocolPrefix), bsnet.WithConnectEventManager(evm))
	x.bs = bitswap.New(ctx, net, finder, cfg.Store.Blockstore(), opts...)
	// bitswap hears of connections made from now on; those the host
	// already has (an exchange restarted on a running node) are told now,
	// relayed ones too, or it would never ask those peers. Twice told is
	// once.
	for _, c := range cfg.Host.Network().Conns() {
		evm.Connected(c.RemotePeer())
	}
	return x, nil
}

func orDefault[T int | uint](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Close stops serving and fetching: running Fetches fail, and the host no
// longer answers the bitswap protocols. It does not close the store or
// the host.
func (x *Exchange) Close() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	x.mu.Unlock()
	// bitswap's network leaves its stream handlers on the host; a closed
	// exchange must not take streams (and a later one sets its own).
	for _, p := range x.protos {
		x.host.RemoveStreamHandler(p)
	}
	return x.bs.Close()
}

// Provide announces in the router that this node has c. Without a router
// it does nothing.
func (x *Exchange) Provide(ctx context.Context, c cid.Cid) error {
	if !c.Defined() {
		return errors.New("provide: no CID given")
	}
	if x.isClosed() {
		return ErrExchangeClosed
	}
	if x.router == nil {
		return nil
	}
	if err := x.router.Provide(ctx, c, true); err != nil {
		return fmt.Errorf("provide %s: %w", c, err)
	}
	return nil
}

func (x *Exchange) isClosed() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.closed
}

// FetchProgress is how much of the DAG is in the store so far: blocks
// fetched and blocks that were already there.
type FetchProgress struct {
	Blocks int
	Bytes  int64
}

// FetchResult is what a Fetch brought together.
type FetchResult struct {
	Root   cid.Cid
	Blocks int   // blocks of the DAG, fetched or already in the store
	Bytes  int64 // their bytes
	// Peers is how many distinct peers sent blocks of it (0 when every
	// block was already here).
	Peers int
}

// Fetch gets the whole DAG under root into the store and pins root. GC is
// held off from the first block to the pin, so it never sweeps part of a
// DAG about to be pinned; a GC waits for a running Fetch. Blocks already
// in the store are not fetched again, so a failed Fetch resumes where it
// stopped.
//
// Every block is checked against its CID before it is stored (bitswap
// derives a received block's CID from its bytes, so wrong bytes are a
// block nobody asked for, which is dropped and logged).
//
// Fetch waits for missing blocks until ctx ends; the caller sets the
// deadline. It then fails with an error wrapping ErrNotFound and ctx's
// error that names a missing block. A block the store's quota refuses
// fails it with an error wrapping ErrQuota. Nothing is pinned on failure;
// the blocks already written stay until a GC.
//
// progress, when not nil, is called after each write from the goroutine
// running Fetch: it must be fast and must not call back into the Exchange
// or the Store.
func (x *Exchange) Fetch(ctx context.Context, root cid.Cid, progress func(FetchProgress)) (FetchResult, error) {
	if !root.Defined() {
		return FetchResult{}, errors.New("fetch: no root CID given")
	}
	if err := verifcid.ValidateCid(verifcid.DefaultAllowlist, root); err != nil {
		return FetchResult{}, fmt.Errorf("fetch %s: %w", root, err)
	}
	if x.isClosed() {
		return FetchResult{}, ErrExchangeClosed
	}
	f := &fetch{
		x:        x,
		root:     root,
		progress: progress,
		visited:  map[string]bool{},
		wanting:  map[string]cid.Cid{},
		peers:    map[peer.ID]bool{},
		empty:    map[cid.Prefix]cid.Cid{},
		bound:    boundOf(ctx),
	}
	err := x.store.fillAndPin(ctx, root, f.run)
	f.forget()
	res := FetchResult{Root: root, Blocks: f.blocks, Bytes: f.bytes, Peers: len(f.peers)}
	if err != nil {
		// The caller may fetch again at once (a retried job fetch):
		// that fetch must not start before bitswap has withdrawn this
		// one's wants (withdrawn).
		f.withdrawn()
		return res, fmt.Errorf("fetch %s: %w", root, err)
	}
	return res, nil
}

// fetch is one Fetch's walk: a window of wants out through one bitswap
// session, each received block written, then its links wanted.
type fetch struct {
	x        *Exchange
	root     cid.Cid
	progress func(FetchProgress)

	visited map[string]bool    // CIDs queued, wanted or done: each is wanted once
	queue   []cid.Cid          // to look up locally, then want
	wanting map[string]cid.Cid // wanted and not yet received
	asked   []string           // keys counted in x.wanted
	peers   map[peer.ID]bool
	empty   map[cid.Prefix]cid.Cid // the CID of no bytes, by prefix
	bound   *walkBound             // FetchWithin's depth and entry bounds (bounds.go); nil: none
	sources *redialer              // redials the peers that sent blocks when they drop (redial.go)
	// rewanted counts the re-wants after redials; lastBlock and
	// lastRewant are when a wanted block last came and the last re-want.
	rewanted              int
	lastBlock, lastRewant time.Time
	blocks                int
	bytes                 int64
}

// event is a block from a want batch, or (blk nil) the end of the batch.
type event struct {
	blk   blocks.Block
	batch []cid.Cid
}

func (f *fetch) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the session and the batch forwarders
	f.sources = f.x.watchSources(ctx)
	defer f.sources.stop()
	var sess exchange.Fetcher = f.x.bs.NewSession(ctx)
	events := make(chan event, putBatch)
	// Received blocks are written by one writer goroutine while this one
	// goes on wanting: the network is not idle while a batch's files are
	// synced. Each store write takes every block the walk has handed
	// over since the last one began, up to a batch (a group commit,
	// writer): a write costs a filesystem sync whatever its size, so
	// writing each arrival as it came made writes of one or two blocks,
	// and the writer, not the network, set the pace.
	//
	// The walk takes no more blocks from bitswap while three batches wait
	// for the writer (3*putBatch blocks, or maxUnwritten bytes), so blocks
	// received and not yet stored stay bounded: fetchWindow blocks, three
	// batches and one take of putBatch blocks. Three, not two: with two,
	// a 1-peer fetch of 1 GiB was slower than handing each arrival over
	// had been (docs/PERFORMANCE.md, "Blocks gathered behind a busy
	// writer"). Each slice on writes holds a block at least, so writes
	// never fills, and the walk never waits to send while the writer
	// waits to report. written holds one report, so the writer finishes
	// at most the write it is in after the report that passes a
	// FetchWithin bound, as the bound promises. The writer has finished
	// before run returns, so every write is inside fillAndPin's hold on
	// GC.
	writes := make(chan []blocks.Block, 4*putBatch)
	written := make(chan writeResult, 1)
	go f.writer(ctx, writes, written)
	defer func() {
		// A walk that ends with blocks still queued (an error) does not
		// write them: the writer starts no write once ctx has ended.
		cancel()
		close(writes)
		for range written {
		}
	}()
	// Handed to the writer and not yet reported: blocks, and their bytes.
	var unwritten int
	var unwrittenBytes int64
	var stallTick <-chan time.Time
	if !f.x.noRewant {
		t := time.NewTicker(rewantStall / 2)
		defer t.Stop()
		stallTick = t.C
	}
	if err := f.enqueue(f.root); err != nil {
		return err
	}
	f.lastBlock = time.Now() // the stall check counts from the start
	for {
		// A cancelled fetch stops here, before blocks already received
		// are written: otherwise the select below picks at random
		// between them and the cancel, and a killed fetch may finish.
		if err := ctx.Err(); err != nil {
			return f.missing(err)
		}
		// Take what the store already has, then fill the window.
		for len(f.queue) > 0 && len(f.wanting) < fetchWindow {
			var batch []cid.Cid
			for len(f.queue) > 0 && len(f.wanting) < fetchWindow {
				c := f.queue[0]
				f.queue = f.queue[1:]
				local, err := f.local(ctx, c)
				if err != nil {
					return err
				}
				if !local {
					f.wanting[c.KeyString()] = c
					batch = append(batch, c)
				}
			}
			if len(batch) > 0 {
				if err := f.want(ctx, sess, batch, events); err != nil {
					return err
				}
			}
		}
		if len(f.wanting) == 0 && len(f.queue) == 0 && unwritten == 0 {
			return f.bound.walked(f.root, f.bytes, f.blocks)
		}
		// Enough behind the writer: take nothing more until it has
		// written some.
		incoming := events
		paused := unwritten >= 3*putBatch || unwrittenBytes >= maxUnwritten
		if paused {
			incoming = nil
		}
		select {
		case ev := <-incoming:
			got, ended := take(ev, events, unwrittenBytes)
			plain, err := f.received(got)
			if err != nil {
				return err
			}
			if len(plain) > 0 {
				writes <- plain // never waits (see writes)
				unwritten += len(plain)
				unwrittenBytes += blockBytes(plain)
				f.x.handed.Add(int64(len(plain)))
			}
			if ended != nil {
				if err := f.ended(ctx, ended); err != nil {
					return err
				}
			}
		case r := <-written:
			unwritten -= len(r.blocks)
			unwrittenBytes -= r.bytes
			if err := f.wrote(r); err != nil {
				return err
			}
		case <-f.sources.redialled:
			// A source is back on a new connection; what this fetch
			// still wants goes to it now (redial.go).
			if err := f.rewant(ctx, &sess, events); err != nil {
				return err
			}
		case <-stallTick:
			// After a redial, wants that still go unanswered are sent
			// again: bitswap may hold them as sent on a stream that broke
			// (redial.go). So are wants for blocks a fetch that ended
			// lately had wanted: bitswap may hold them as sent for that
			// fetch (withdraw.go). A walk paused for its writer is
			// waiting on the disk, not the network: the stall is counted
			// from when it takes blocks again.
			if paused {
				f.lastBlock = time.Now()
				break
			}
			if len(f.wanting) > 0 && time.Since(f.lastBlock) > rewantStall && time.Since(f.lastRewant) > rewantStall {
				switch {
				case f.rewanted > 0:
					f.sources.kick()
				case f.x.stoppedWanting(f.wanting, time.Now().Add(-staleWants)):
					f.x.restartConnected()
				default:
					continue
				}
				if err := f.rewant(ctx, &sess, events); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return f.missing(ctx.Err())
		}
	}
}

// take takes ev and, without waiting, the received blocks after it for
// the writer: up to a batch, up to a want batch's end (ended, handled
// after the blocks before it), and no more than brings the bytes that
// wait for the writer (unwritten before the take) to maxUnwritten, so
// that a DAG of 2 MiB blocks passes that bound by one block, not by a
// batch of them, however many have queued up.
func take(ev event, events <-chan event, unwritten int64) (got []blocks.Block, ended []cid.Cid) {
	for {
		if ev.blk == nil {
			return got, ev.batch
		}
		got = append(got, ev.blk)
		unwritten += int64(len(ev.blk.RawData()))
		if len(got) == putBatch || unwritten >= maxUnwritten {
			return got, nil
		}
		select {
		case ev = <-events:
		default:
			return got, nil
		}
	}
}

// blockBytes is the bytes of bs's data.
func blockBytes(bs []blocks.Block) int64 {
	var n int64
	for _, b := range bs {
		n += int64(len(b.RawData()))
	}
	return n
}

// writeResult is what the writer reports of one batch.
type writeResult struct {
	blocks []blocks.Block
	bytes  int64 // of blocks' data, summed once by the writer
	err    error
}

// writer stores the blocks handed to it on writes and reports each store
// write on written, until writes is closed; then it closes written. Each
// write takes, without waiting, everything handed over since the last
// one began, up to putBatch blocks; the rest waits for the next. Once ctx
// has ended it writes nothing more.
func (f *fetch) writer(ctx context.Context, writes <-chan []blocks.Block, written chan<- writeResult) {
	defer close(written)
	var carry []blocks.Block // handed over, beyond the last write's batch
	for {
		batch := carry
		if len(batch) == 0 {
			first, ok := <-writes
			if !ok {
				return
			}
			batch = first
		}
	gather:
		for len(batch) < putBatch {
			select {
			case more, ok := <-writes:
				if !ok {
					break gather
				}
				batch = append(batch[:len(batch):len(batch)], more...)
			default:
				break gather
			}
		}
		carry = nil
		if len(batch) > putBatch {
			batch, carry = batch[:putBatch:putBatch], batch[putBatch:]
		}
		if err := ctx.Err(); err != nil {
			written <- writeResult{err: err}
			continue
		}
		if err := f.x.store.Blockstore().PutMany(ctx, batch); err != nil {
			written <- writeResult{err: fmt.Errorf("store %d blocks from %s: %w", len(batch), batch[0].Cid(), err)}
			continue
		}
		// Sessions waiting for the same blocks, and peers that want them
		// from us, hear of them now. Bitswap fails this only once it is
		// closing, which the walk notices by itself.
		_ = f.x.bs.NotifyNewBlocks(ctx, batch...)
		written <- writeResult{blocks: batch, bytes: blockBytes(batch)}
	}
}

// want asks the session for batch and forwards what comes back, then the
// batch's end, to events.
func (f *fetch) want(ctx context.Context, sess exchange.Fetcher, batch []cid.Cid, events chan<- event) error {
	f.x.mu.Lock()
	for _, c := range batch {
		k := c.KeyString()
		f.x.wanted[k]++
		f.asked = append(f.asked, k)
	}
	f.x.mu.Unlock()
	ch, err := sess.GetBlocks(ctx, batch)
	if err != nil {
		return fmt.Errorf("want %d blocks: %w", len(batch), err)
	}
	go func() {
		for b := range ch {
			select {
			case events <- event{blk: b}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case events <- event{batch: batch}:
		case <-ctx.Done():
		}
	}()
	return nil
}

// rewant wants every block still missing again, in a new session that
// becomes the fetch's: its first wants go to every connected peer.
func (f *fetch) rewant(ctx context.Context, sess *exchange.Fetcher, events chan<- event) error {
	if f.x.noRewant || len(f.wanting) == 0 {
		return nil
	}
	*sess = f.x.bs.NewSession(ctx)
	batch := make([]cid.Cid, 0, len(f.wanting))
	for _, c := range f.wanting {
		batch = append(batch, c)
	}
	if err := f.want(ctx, *sess, batch, events); err != nil {
		return err
	}
	f.rewanted++
	f.lastRewant = time.Now()
	f.x.rewants.Add(1)
	return nil
}

// enqueue queues c unless it was seen before in this walk.
func (f *fetch) enqueue(c cid.Cid) error {
	k := c.KeyString()
	if f.visited[k] {
		return nil
	}
	// A link comes from a peer's DAG: refuse hashes that do not secure it.
	if err := verifcid.ValidateCid(verifcid.DefaultAllowlist, c); err != nil {
		return fmt.Errorf("link to %s: %w", c, err)
	}
	f.visited[k] = true
	f.queue = append(f.queue, c)
	return nil
}

// local takes c from the store (or from the CID itself, for an identity
// hash) if it is there, and queues its links.
func (f *fetch) local(ctx context.Context, c cid.Cid) (bool, error) {
	var b blocks.Block
	if c.Prefix().MhType == multihash.IDENTITY {
		dec, err := multihash.Decode(c.Hash())
		if err != nil {
			return false, fmt.Errorf("block %s: %w", c, err)
		}
		b, err = blocks.NewBlockWithCid(dec.Digest, c)
		if err != nil {
			return false, err
		}
	} else if f.isEmpty(c) {
		// Bitswap servers take a block of size 0 for one they lack
		// (boxo v0.41 decision engine), so the empty block, an empty
		// file's raw leaf, is never served; its bytes are known anyway.
		b, _ = blocks.NewBlockWithCid(nil, c)
		if err := f.x.store.Blockstore().Put(ctx, b); err != nil {
			return false, fmt.Errorf("store empty block %s: %w", c, err)
		}
	} else {
		bs := f.x.store.Blockstore()
		if c.Type() == cid.Raw {
			// A leaf: nothing to read below it, so only ask whether it is here.
			n, err := bs.GetSize(ctx, c)
			if isNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("block %s: %w", c, err)
			}
			f.blocks++
			f.bytes += int64(n)
			return true, nil
		}
		var err error
		b, err = bs.Get(ctx, c)
		if isNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("block %s: %w", c, err)
		}
	}
	if err := f.links(b); err != nil {
		return false, err
	}
	f.blocks++
	f.bytes += int64(len(b.RawData()))
	return true, nil
}

// isEmpty says whether c names the block of no bytes.
func (f *fetch) isEmpty(c cid.Cid) bool {
	p := c.Prefix()
	e, ok := f.empty[p]
	if !ok {
		var err error
		if e, err = p.Sum(nil); err != nil {
			e = cid.Undef
		}
		f.empty[p] = e
	}
	return e.Defined() && e.Equals(c)
}

// received takes the blocks of got that this fetch wants, noting their
// senders, and queues their links at once, so that the blocks below are
// wanted while these are still being written.
func (f *fetch) received(got []blocks.Block) ([]blocks.Block, error) {
	plain := make([]blocks.Block, 0, len(got))
	for _, b := range got {
		if tb, ok := b.(traceability.Block); ok {
			if tb.From != "" {
				if !f.peers[tb.From] {
					f.sources.served(tb.From)
				}
				f.peers[tb.From] = true
			}
			b = tb.Block
		}
		k := b.Cid().KeyString()
		if _, ok := f.wanting[k]; !ok {
			continue // not asked for by this fetch, or already here
		}
		delete(f.wanting, k)
		f.lastBlock = time.Now()
		if err := f.links(b); err != nil {
			return nil, err
		}
		plain = append(plain, b)
	}
	return plain, nil
}

// wrote counts a batch the writer stored, or fails the walk with its
// error.
func (f *fetch) wrote(r writeResult) error {
	if r.err != nil {
		return r.err
	}
	f.blocks += len(r.blocks)
	f.bytes += r.bytes
	if f.progress != nil {
		f.progress(FetchProgress{Blocks: f.blocks, Bytes: f.bytes})
	}
	return nil
}

// links queues the blocks b links to. gleaner DAGs are UnixFS: dag-pb
// nodes and raw leaves.
func (f *fetch) links(b blocks.Block) error {
	c := b.Cid()
	switch c.Type() {
	case cid.Raw:
		return nil
	case cid.DagProtobuf:
		n, err := merkledag.DecodeProtobuf(b.RawData())
		if err != nil {
			return fmt.Errorf("block %s: %w", c, err)
		}
		if err := f.bound.linked(c, n); err != nil {
			return err
		}
		for _, l := range n.Links() {
			if err := f.enqueue(l.Cid); err != nil {
				return fmt.Errorf("block %s: %w", c, err)
			}
		}
		return nil
	default:
		return fmt.Errorf("block %s: codec %#x is not dag-pb or raw, the codecs of a UnixFS DAG", c, c.Type())
	}
}

// ended handles the end of a want batch: a block of it still wanted will
// not come through this session any more.
func (f *fetch) ended(ctx context.Context, batch []cid.Cid) error {
	for _, c := range batch {
		if _, ok := f.wanting[c.KeyString()]; ok {
			cause := ctx.Err()
			if cause == nil && f.x.isClosed() {
				cause = ErrExchangeClosed
			}
			if cause == nil {
				cause = errors.New("bitswap ended the request")
			}
			return f.missing(cause)
		}
	}
	return nil
}

// missing is the error for a walk stopped by cause with blocks wanted.
func (f *fetch) missing(cause error) error {
	var first cid.Cid
	for _, c := range f.wanting {
		if !first.Defined() || c.String() < first.String() {
			first = c // the same CID for the same state, whatever map order
		}
	}
	if !first.Defined() && len(f.queue) > 0 {
		first = f.queue[0]
	}
	if !first.Defined() {
		// Everything arrived; the end came while the last were written.
		return fmt.Errorf("stopped while storing the last blocks of %s: %w", f.root, cause)
	}
	more := ""
	if n := len(f.wanting) + len(f.queue) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Errorf("block %s%s: %w: %w", first, more, ErrNotFound, cause)
}

// forget takes this fetch's wants out of the exchange's count.
func (f *fetch) forget() {
	f.x.mu.Lock()
	defer f.x.mu.Unlock()
	now := time.Now()
	for _, k := range f.asked {
		if f.x.wanted[k]--; f.x.wanted[k] <= 0 {
			delete(f.x.wanted, k)
			f.x.rememberWanted(k, now)
		}
	}
}

// wantMemory is how long a block a fetch stopped wanting still counts as
// asked for: a peer answering a cancelled want late sends good bytes, not
// a strike. maxRemembered bounds that memory.
const (
	wantMemory    = 10 * time.Minute
	maxRemembered = 1 << 16
)

// rememberWanted notes that k was wanted until now. Called with x.mu held.
func (x *Exchange) rememberWanted(k string, now time.Time) {
	if len(x.recent) >= maxRemembered {
		for old, at := range x.recent {
			if now.Sub(at) > wantMemory {
				delete(x.recent, old)
			}
		}
		if len(x.recent) >= maxRemembered {
			x.recent = map[string]time.Time{} // all recent: forget rather than grow
		}
	}
	x.recent[k] = now
}

// wasWanted: some fetch wants k, or wanted it within wantMemory. Called
// with x.mu held.
func (x *Exchange) wasWanted(k string) bool {
	if x.wanted[k] > 0 {
		return true
	}
	at, ok := x.recent[k]
	return ok && time.Since(at) <= wantMemory
}

// unrequestedTracer warns of received blocks that no fetch asked for and
// the store does not have: a peer that sends wrong bytes under a CID
// produces exactly these, since bitswap names a received block by the hash
// of its bytes. Bitswap drops them; nothing of them is stored. Each is a
// strike against its sender; at BadBlockStrikes, OnBadPeer is told.
type unrequestedTracer struct{ x *Exchange }

// BadBlockStrikes is how many unasked-for blocks a peer may send before
// OnBadPeer hears of it. One is enough: bitswap names a received block by
// the hash of its bytes, so a block no fetch wants or wanted lately
// (wasWanted) is wrong bytes for a CID, or spam, never a late good block.
const BadBlockStrikes = 1

// maxStruck bounds the peers whose strikes are remembered: a flood of
// peer IDs cannot grow the map without end.
const maxStruck = 1024

// strike counts one bad block from p and reports whether it crossed the
// limit (the count then starts again).
func (x *Exchange) strike(p peer.ID) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.strikes == nil || len(x.strikes) >= maxStruck && x.strikes[p] == 0 {
		x.strikes = map[peer.ID]int{}
	}
	x.strikes[p]++
	if x.strikes[p] < BadBlockStrikes {
		return false
	}
	delete(x.strikes, p)
	return true
}

func (t unrequestedTracer) MessageReceived(p peer.ID, msg bsmsg.BitSwapMessage) {
	for _, b := range msg.Blocks() {
		k := b.Cid().KeyString()
		t.x.mu.Lock()
		asked := t.x.wasWanted(k)
		t.x.mu.Unlock()
		if asked {
			continue
		}
		if has, err := t.x.store.Blockstore().Has(context.Background(), b.Cid()); err == nil && has {
			continue // a late duplicate of a block already fetched
		}
		t.x.log.Warn("bitswap: peer sent a block no fetch asked for (wrong bytes for a CID, or spam); dropped",
			"peer", p, "block", b.Cid(), "bytes", len(b.RawData()))
		if t.x.strike(p) && t.x.onBadPeer != nil {
			t.x.onBadPeer(p)
		}
	}
}

func (unrequestedTracer) MessageSent(peer.ID, bsmsg.BitSwapMessage) {}

func isNotFound(err error) bool { return err != nil && ipld.IsNotFound(err) }
