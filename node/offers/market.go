// Package offers is the offer side of a node: the offer book fed by the
// offer topics and DHT sweeps (Market), the provider's signed offer built
// from the owner's settings and the GPUs' availability (Publisher), and
// the settings and their patches themselves (Settings, Patch).
package offers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/p2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"
)

// Offer gossip and stream protocol names, scoped by p2p to /gleaner/N/.
const (
	StreamProto    = "offer/1" // a provider's current offer, on request
	offerRateBurst = 10        // offers an author may publish back to back
)

// offerRate is how often one provider may re-publish: offers change when
// the owner edits them or a GPU comes and goes, never many times a second.
var offerRate = rate.Every(time.Second)

func offerTopicName(continent string) string { return "offers/" + continent + "/1" }

// Market keeps this node's view of every offer: the book, fed by the offer
// topics of the continents it buys from, and by DHT sweeps for offers it
// missed (a node that joined late).
type Market struct {
	host       *p2p.Host
	book       *auction.Book
	log        *slog.Logger
	now        func() time.Time
	continents []string

	mu       sync.Mutex // guards topics and limiters
	topics   map[string]*pubsub.Topic
	limiters map[peer.ID]*rate.Limiter
}

// NewMarket makes a market on h whose book holds at most maxOffers offers,
// following the offer topics of continents (all of them when empty).
func NewMarket(h *p2p.Host, maxOffers int, continents []string, log *slog.Logger) *Market {
	if len(continents) == 0 {
		continents = auction.Continents
	}
	return &Market{
		host: h, log: log, now: time.Now, continents: continents,
		book:     auction.NewBook(maxOffers, time.Now),
		topics:   make(map[string]*pubsub.Topic),
		limiters: make(map[peer.ID]*rate.Limiter),
	}
}

// Start subscribes to the continents' offer topics and starts the expiry
// and DHT-sweep loops; all stop with ctx.
func (m *Market) Start(ctx context.Context) error {
	for _, c := range m.continents {
		t, err := m.topic(c)
		if err != nil {
			return err
		}
		sub, err := t.Subscribe()
		if err != nil {
			return fmt.Errorf("subscribe to %s offers: %w", c, err)
		}
		go m.readLoop(ctx, sub)
	}
	go m.expireLoop(ctx)
	go m.sweepLoop(ctx)
	if events, err := m.host.SubscribePeerEvents(ctx); err == nil {
		go m.connectLoop(ctx, events, m.fetchPeer)
	}
	return nil
}

// topic joins a continent's offer topic once; providers publish to their own
// continent through the same handle.
func (m *Market) topic(continent string) (*pubsub.Topic, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.topics[continent]; ok {
		return t, nil
	}
	t, err := m.host.Join(offerTopicName(continent), m.validate, auction.MaxOfferBytes)
	if err != nil {
		return nil, fmt.Errorf("join %s offers: %w", continent, err)
	}
	m.topics[continent] = t
	return t, nil
}

// validate runs on every gossiped offer before it is delivered or forwarded.
// Reject (which costs the forwarding peer score) for anything a correct
// node would never send; Ignore for what may be honest (a duplicate).
func (m *Market) validate(_ context.Context, _ peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	author := msg.GetFrom()
	o, _, err := auction.DecodeSignedOffer(msg.Data, m.now())
	if err != nil {
		m.log.Debug("offer rejected", "author", author, "err", err)
		return pubsub.ValidationReject
	}
	if o.Provider != author.String() || o.Network != m.host.Network() {
		// An offer may only travel as its provider's own message: nobody
		// can replay someone else's offer under their own name.
		m.log.Debug("offer rejected: not its provider's own message", "author", author, "provider", o.Provider)
		return pubsub.ValidationReject
	}
	if !m.allow(author) {
		m.log.Debug("offer rejected: author floods", "author", author)
		return pubsub.ValidationReject
	}
	if cur, raw, ok := m.book.Get(o.Provider); ok {
		switch {
		case o.Seq < cur.Seq:
			m.log.Debug("offer rejected: older sequence number (replay)", "author", author, "seq", o.Seq, "have", cur.Seq)
			return pubsub.ValidationReject
		case o.Seq == cur.Seq && bytes.Equal(raw, msg.Data):
			return pubsub.ValidationIgnore
		case o.Seq == cur.Seq:
			m.log.Debug("offer rejected: two different offers with one sequence number", "author", author, "seq", o.Seq)
			return pubsub.ValidationReject
		}
	}
	msg.ValidatorData = o
	return pubsub.ValidationAccept
}

func (m *Market) allow(author peer.ID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.limiters[author]
	if !ok {
		if len(m.limiters) > 4*MaxBookDefault {
			clear(m.limiters) // bounded memory; a fresh bucket is full, not empty
		}
		l = rate.NewLimiter(offerRate, offerRateBurst)
		m.limiters[author] = l
	}
	return l.Allow()
}

func (m *Market) readLoop(ctx context.Context, sub *pubsub.Subscription) {
	defer sub.Cancel()
	for {
		msg, err := sub.Next(ctx)
		if err != nil {
			return
		}
		o, ok := msg.ValidatorData.(*auction.Offer)
		if !ok {
			continue
		}
		if _, err := m.book.Put(o, msg.Data); err != nil && !errors.Is(err, auction.ErrStaleSeq) {
			m.log.Debug("offer not stored", "provider", o.Provider, "err", err)
		}
	}
}

// put stores an offer that came from somewhere other than gossip (a stream,
// or this node itself), after the same checks.
func (m *Market) put(raw []byte, from peer.ID) error {
	o, _, err := auction.DecodeSignedOffer(raw, m.now())
	if err != nil {
		return err
	}
	if o.Provider != from.String() || o.Network != m.host.Network() {
		return fmt.Errorf("offer from %s names provider %s on network %q", from, o.Provider, o.Network)
	}
	_, err = m.book.Put(o, raw)
	return err
}

func (m *Market) expireLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.book.Expire()
		}
	}
}

// sweepLoop finds providers through the DHT and fetches the offers the book
// lacks. It runs soon after start and then backs off: a late joiner fills
// its book within seconds, after which gossip keeps it current.
//
// The first sweep waits for the DHT's first peer rather than for a fixed
// delay: before that a lookup finds nothing, and a sweep that ran too early
// cost a backoff step (the next one came 400 ms later, then 800 ms), while
// one that runs the moment a bootstrap peer is identified saves the
// difference on every join.
func (m *Market) sweepLoop(ctx context.Context) {
	if !m.waitForDHTPeer(ctx) {
		return
	}
	delay := 200 * time.Millisecond
	for {
		m.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		// Once gossip carries the book, sweeps only repair what it
		// missed: back off to ten minutes, jittered so that nodes started
		// together do not walk the DHT in lockstep.
		delay = min(delay*2, sweepMax)
		delay += time.Duration(mathrand.Int64N(int64(delay)/5 + 1))
	}
}

// sweepMax bounds the sweep interval; see sweepLoop.
const sweepMax = 10 * time.Minute

// waitForDHTPeer returns once the routing table holds a peer (true) or ctx
// ends (false). It polls every 10 ms (a size check is a lock and a sum)
// for the seconds a join takes, then every second for a node that stays
// alone.
func (m *Market) waitForDHTPeer(ctx context.Context) bool {
	start := time.Now()
	for m.host.DHT().RoutingTable().Size() == 0 {
		poll := 10 * time.Millisecond
		if time.Since(start) > 5*time.Second {
			poll = time.Second
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(poll):
		}
	}
	return true
}

func (m *Market) sweep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// Fetch each provider as the lookup finds it rather than after the
	// whole lookup: the first offers arrive in milliseconds.
	provs := m.host.DHT().FindProvidersAsync(ctx, m.host.CapabilityCID("offer", "any"), 0)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for ai := range provs {
		if ai.ID == m.host.ID() {
			continue
		}
		if _, _, ok := m.book.Get(ai.ID.String()); ok {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := m.fetch(ctx, ai); err != nil {
				m.log.Debug("offer fetch", "peer", ai.ID, "err", err)
			}
		}()
	}
	wg.Wait()
}

// A peer that connects is asked for its offer at once, over /offer/1:
// a provider back from a restart (whose first offers went out before it
// had peers), or any peer after this node's own restart, is in the book
// within a round trip of the connection, not at the next DHT sweep,
// which may be ten minutes away by then (and never comes for a provider
// whose old offer the book still holds). Bounded: each peer
// connectFetchBurst times back to back (a restart reconnects within
// seconds of the first connection), then once per connectFetchEvery
// however often it reconnects; connectFetchParallel fetches at a time;
// and what a burst of connections leaves beyond connectFetchQueue waits
// for the sweep.
const (
	connectFetchEvery    = time.Minute
	connectFetchBurst    = 3
	connectFetchParallel = 4
	connectFetchQueue    = 64
	connectFetchPeers    = 4 * connectFetchQueue // peers whose budget is tracked
)

// connectLoop fetches the offers of peers as they connect, until events
// closes (ctx ended or the host closed).
func (m *Market) connectLoop(ctx context.Context, events <-chan p2p.PeerEvent, fetch func(context.Context, peer.ID) error) {
	queue := make(chan peer.ID, connectFetchQueue)
	var workers sync.WaitGroup
	defer workers.Wait()
	defer close(queue)
	for range connectFetchParallel {
		workers.Go(func() {
			for id := range queue {
				if ctx.Err() != nil {
					continue // drain
				}
				if err := fetch(ctx, id); err != nil {
					m.log.Debug("offer fetch on connect", "peer", id, "err", err)
				}
			}
		})
	}
	budget := make(map[peer.ID]*rate.Limiter)
	for e := range events {
		if e.Type != "connected" || e.Peer == m.host.ID() {
			continue
		}
		l, ok := budget[e.Peer]
		if !ok {
			if len(budget) >= connectFetchPeers {
				for id, l := range budget { // a full budget is a fresh one
					if l.Tokens() >= connectFetchBurst {
						delete(budget, id)
					}
				}
			}
			if len(budget) >= connectFetchPeers {
				continue // a flood of connections: the sweep repairs
			}
			l = rate.NewLimiter(rate.Every(connectFetchEvery), connectFetchBurst)
			budget[e.Peer] = l
		}
		if !l.Allow() {
			continue
		}
		select {
		case queue <- e.Peer:
		default: // the workers are behind: the sweep repairs
		}
	}
}

// fetchPeer is fetch of a peer whose addresses the peerstore holds (or
// that is connected).
func (m *Market) fetchPeer(ctx context.Context, id peer.ID) error {
	return m.fetch(ctx, peer.AddrInfo{ID: id})
}

// fetch asks one provider for its current offer over /gleaner/N/offer/1.
func (m *Market) fetch(ctx context.Context, ai peer.AddrInfo) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if len(ai.Addrs) > 0 {
		m.host.LibP2P().Peerstore().AddAddrs(ai.ID, ai.Addrs, time.Minute)
	}
	s, err := m.host.LibP2P().NewStream(ctx, ai.ID, m.host.ProtocolID(StreamProto))
	if err != nil {
		return err
	}
	defer s.Close()
	dl, _ := ctx.Deadline()
	_ = s.SetDeadline(dl)
	raw, err := p2p.ReadFrame(s, auction.MaxOfferBytes)
	if err != nil {
		return err
	}
	if len(raw) == 0 {
		return nil // the provider offers nothing right now
	}
	return m.put(raw, ai.ID)
}

// ServeOffer answers /offer/1 with the current signed offer, or an empty
// frame when there is none. The requester sends nothing, so there is no
// input to validate beyond the deadline.
func ServeOffer(current func() []byte) network.StreamHandler {
	return func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(5 * time.Second))
		_ = p2p.WriteFrame(s, current(), auction.MaxOfferBytes)
	}
}

// MaxBookDefault bounds the book when the config does not say otherwise:
// 100,000 providers is the design's scale target.
const MaxBookDefault = 100_000

// Book is the offer book the market fills.
func (m *Market) Book() *auction.Book { return m.book }

// Host is the p2p host the market runs on.
func (m *Market) Host() *p2p.Host { return m.host }
