package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// provider turns the machine's available GPUs and the owner's settings into
// a signed offer, publishes it on its continent's topic, re-announces it
// before it expires, provides it in the DHT, and withdraws it when the owner
// pauses, a GPU leaves, or the node stops.
type provider struct {
	m     *market
	store *Store
	key   crypto.PrivKey
	log   *slog.Logger
	ttl   time.Duration
	now   func() time.Time
	kick  chan struct{}
	bg    context.Context // lives as long as the node's market

	// publishMu serialises whole publications, gossip included, and spaces
	// them minPublishGap apart: two offers in flight at once could arrive
	// out of order, and renters treat an older sequence number as a replay.
	publishMu   sync.Mutex
	lastPublish time.Time

	mu         sync.Mutex // guards everything below
	settings   OfferSettings
	avail      attest.Availability
	gpuErr     error // why there are no GPUs to sell, when there are none
	seq        uint64
	current    *auction.Offer // nil when nothing is offered
	raw        []byte         // current signed offer (an offer or a withdrawal)
	reason     string         // why nothing is offered
	provided   string         // the capability set last provided in the DHT
	providedAt time.Time
	onAvail    func(attest.Availability) // the job runner's preemption hook
}

type offerState struct {
	Settings OfferSettings `json:"settings"`
	Seq      uint64        `json:"seq"`
}

const offerStateKey = "state"

func newProvider(bg context.Context, m *market, store *Store, key crypto.PrivKey, ttl time.Duration, log *slog.Logger) (*provider, error) {
	p := &provider{bg: bg, m: m, store: store, key: key, log: log, ttl: ttl, now: time.Now, kick: make(chan struct{}, 1)}
	st := offerState{Settings: defaultOfferSettings()}
	if err := store.Get(bucketOffer, offerStateKey, &st); err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("load offer settings: %w", err)
	}
	p.settings, p.seq = st.Settings, st.Seq
	return p, nil
}

// setAvailability is the GPU monitor's callback.
func (p *provider) setAvailability(a attest.Availability) {
	p.mu.Lock()
	p.avail = a
	hook := p.onAvail
	p.mu.Unlock()
	if hook != nil {
		hook(a)
	}
	p.poke()
}

func (p *provider) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// minPublishGap keeps an honest provider far below renters' flood limit and
// makes gossip reordering of its own offers practically impossible.
const minPublishGap = time.Second

// update applies a change to the settings and persists it; the caller
// publishes.
func (p *provider) update(change func(OfferSettings) (OfferSettings, error)) (OfferSettings, error) {
	p.mu.Lock()
	next, err := change(p.settings)
	if err == nil {
		err = p.store.Update(func(tx *StoreTx) error {
			return tx.Put(bucketOffer, offerStateKey, offerState{Settings: next, Seq: p.seq})
		})
	}
	if err == nil {
		p.settings = next
	}
	p.mu.Unlock()
	if err != nil {
		return OfferSettings{}, err
	}
	return next, nil
}

// run publishes whenever something changed and re-announces at 11/12 of
// the offer's lifetime (55 minutes of the default hour), until ctx ends.
// Re-announcing rarely is what keeps gossip within budget at scale; see
// docs/ARCHITECTURE.md.
func (p *provider) run(ctx context.Context) {
	reannounce := time.NewTimer(0)
	defer reannounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-reannounce.C:
		}
		if err := p.publish(ctx); err != nil {
			p.log.Warn("offer not published", "err", err)
		}
		reannounce.Reset(p.ttl * 11 / 12)
	}
}

// publish signs the current offer, or a withdrawal if the node offered
// something before and offers nothing now, and gossips it.
func (p *provider) publish(ctx context.Context) error {
	p.publishMu.Lock()
	defer p.publishMu.Unlock()
	if wait := minPublishGap - time.Since(p.lastPublish); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.mu.Lock()
	o, reason := p.build()
	if o == nil && p.current == nil {
		p.reason = reason
		p.mu.Unlock()
		return nil
	}
	if o == nil { // withdraw what was offered
		w := *p.current
		w.Withdrawn, w.Windows = true, nil
		o = &w
	}
	o.Seq = p.seq + 1
	so, err := auction.SignOffer(o, p.key)
	var raw []byte
	if err == nil {
		raw, err = so.Marshal()
	}
	if err == nil {
		// The sequence number is durable before anyone sees it, so a
		// restart never reuses one (peers would reject it as a replay).
		err = p.store.Update(func(tx *StoreTx) error {
			return tx.Put(bucketOffer, offerStateKey, offerState{Settings: p.settings, Seq: o.Seq})
		})
	}
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.seq, p.raw, p.reason = o.Seq, raw, reason
	if o.Withdrawn {
		p.current = nil
	} else {
		p.current = o
	}
	continent := o.Region.Continent
	p.mu.Unlock()

	t, err := p.m.topic(continent)
	if err != nil {
		return err
	}
	p.lastPublish = time.Now()
	if err := t.Publish(ctx, raw); err != nil {
		return fmt.Errorf("publish offer: %w", err)
	}
	// Our own book shows our own offer even when we do not follow our own
	// continent's topic (when we do, gossip delivered it already).
	if err := p.m.put(raw, p.m.host.ID()); err != nil && !errors.Is(err, auction.ErrStaleSeq) {
		p.log.Debug("own offer not in book", "err", err)
	}
	if !o.Withdrawn {
		// Not the caller's ctx: an RPC request that triggered this
		// publication ends long before the DHT has stored the records.
		go p.provide(p.bg, o)
	}
	return nil
}

// build assembles the offer from settings and availability, or says why
// there is nothing to offer. Called with p.mu held.
func (p *provider) build() (*auction.Offer, string) {
	s := p.settings
	if s.Paused {
		return nil, "paused by the owner (gleaner offer resume)"
	}
	if err := s.Ready(); err != nil {
		return nil, err.Error()
	}
	if p.gpuErr != nil {
		return nil, p.gpuErr.Error()
	}
	var gpus []auction.GPU
	for _, i := range p.avail.Available {
		if i < len(p.avail.Inventory.GPUs) {
			gpus = append(gpus, offerGPU(p.avail.Inventory.GPUs[i]))
		}
	}
	if len(gpus) == 0 {
		return nil, "every GPU is withdrawn (see gleaner offer show)"
	}
	now := p.now().Truncate(time.Second)
	windows, err := s.Calendar.Windows(now, now.Add(7*24*time.Hour))
	if err != nil {
		return nil, "calendar: " + err.Error()
	}
	return &auction.Offer{
		Provider:  p.m.host.ID().String(),
		Network:   p.m.host.Network(),
		IssuedAt:  now.Unix(),
		ExpiresAt: now.Add(p.ttl).Unix(),
		GPUs:      gpus,
		Host:      auction.Host{CPUs: runtime.NumCPU(), MemoryMiB: hostMemoryMiB()},
		Region:    s.Region,
		Prices:    s.Prices,
		Windows:   windows,
		Policy:    s.Policy,
		Addrs:     addrStrings(p.m.host.Addrs()),
		Calendar:  &s.Calendar,
	}, ""
}

// provide announces the offer's capability keys in the DHT when they
// changed since the last time, so renters that join late can find it.
func (p *provider) provide(ctx context.Context, o *auction.Offer) {
	keys := [][2]string{{"offer", "any"}, {"region", o.Region.Continent}}
	for _, g := range o.GPUs {
		keys = append(keys, [2]string{"gpu", g.Model})
	}
	sig := fmt.Sprint(keys)
	p.mu.Lock()
	if p.provided == sig && time.Since(p.providedAt) < 30*time.Minute {
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, k := range keys {
		if err := p.m.host.Provide(ctx, p.m.host.CapabilityCID(k[0], k[1])); err != nil {
			p.log.Debug("provide", "key", k, "err", err)
			return // retried at the next announcement
		}
	}
	p.mu.Lock()
	// kad-dht keeps provider records for 48 h; re-providing with the
	// hourly re-announcement keeps them alive and moves them to the key's
	// closest peers as the network changes.
	p.provided, p.providedAt = sig, time.Now()
	p.mu.Unlock()
}

// withdraw publishes a signed withdrawal on shutdown, so renters drop the
// offer now instead of at its expiry.
func (p *provider) withdraw(ctx context.Context) {
	p.mu.Lock()
	wasPaused := p.settings.Paused
	p.settings.Paused = true
	offered := p.current != nil
	p.mu.Unlock()
	if offered {
		if err := p.publish(ctx); err != nil {
			p.log.Warn("withdrawal not published", "err", err)
		}
	}
	p.mu.Lock()
	p.settings.Paused = wasPaused
	p.mu.Unlock()
}

// currentRaw is what /offer/1 serves: the live offer only, never a
// withdrawal (a late joiner has nothing to remove).
func (p *provider) currentRaw() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current == nil {
		return nil
	}
	return p.raw
}

// offerGPU publishes a GPU's identity as a hash of its UUID: enough to tell
// one GPU leased twice, without handing out the hardware serial.
func offerGPU(g attest.GPU) auction.GPU {
	return auction.GPU{Model: g.Model, VRAMMiB: g.VRAMMiB, ComputeCap: g.ComputeCap, UUIDHash: attest.UUIDHash(g.UUID), Simulated: g.Simulated}
}
