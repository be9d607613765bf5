package offers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/crypto"
	ma "github.com/multiformats/go-multiaddr"
)

// Publisher turns the machine's available GPUs and the owner's settings into
// a signed offer, publishes it on its continent's topic, re-announces it
// before it expires, provides it in the DHT, and withdraws it when the owner
// pauses, a GPU leaves, or the node stops.
type Publisher struct {
	m     *Market
	store StateStore
	key   crypto.PrivKey
	log   *slog.Logger
	ttl   time.Duration
	now   func() time.Time
	kick  chan struct{}
	// refresh asks Run to look at the bookings now (Refresh).
	refresh chan struct{}
	bg      context.Context // lives as long as the node's market

	// publishMu serialises whole publications, gossip included, and spaces
	// them minPublishGap apart: two offers in flight at once could arrive
	// out of order, and renters treat an older sequence number as a replay.
	publishMu   sync.Mutex
	lastPublish time.Time

	mu       sync.Mutex // guards everything below
	settings Settings
	// stopping: the node is stopping and withdraws its offer; unlike a
	// pause it is not the owner's setting and is never saved.
	stopping   bool
	avail      attest.Availability
	gpuErr     error // why there are no GPUs to sell, when there are none
	seq        uint64
	current    *auction.Offer // nil when nothing is offered
	raw        []byte         // current signed offer (an offer or a withdrawal)
	reason     string         // why nothing is offered
	provided   string         // the capability set last provided in the DHT
	providedAt time.Time
	onAvail    func(attest.Availability) // the job runner's preemption hook
	// bookings is what the provider has sold from now on (its scheduler's
	// silver and gold commitments); nil: nothing is ever booked.
	bookings func(now time.Time) []auction.Booking
	// bronze is what its bronze leases hold (the offer's Bronze); nil:
	// none.
	bronze func(now time.Time) []auction.Booking
	// datasets lists the CIDs this node holds pinned (its job-input cache
	// and the owner's datasets), for the offer's Datasets; nil: none.
	datasets func() []string
	// reached is how many of the topic's peers the last publication went
	// to; reachAt when one last went out again for peers that joined.
	reached int
	reachAt time.Time
}

// State is what a publisher keeps durably: the owner's settings and the
// last sequence number it signed.
type State struct {
	Settings Settings `json:"settings"`
	Seq      uint64   `json:"seq"`
}

// StateStore keeps a publisher's State (the node keeps it in its bbolt
// store).
type StateStore interface {
	// LoadState decodes the saved state into s, leaving s as it is when
	// nothing was saved yet.
	LoadState(s *State) error
	// SaveState replaces the saved state durably.
	SaveState(State) error
}

// NewPublisher loads the saved settings and sequence number from store; m
// is the market whose topics it publishes on, bg the context its DHT
// announcements run in.
func NewPublisher(bg context.Context, m *Market, store StateStore, key crypto.PrivKey, ttl time.Duration, log *slog.Logger) (*Publisher, error) {
	p := &Publisher{bg: bg, m: m, store: store, key: key, log: log, ttl: ttl, now: time.Now, kick: make(chan struct{}, 1),
		refresh: make(chan struct{}, 1)}
	st := State{Settings: DefaultSettings()}
	if err := store.LoadState(&st); err != nil {
		return nil, fmt.Errorf("load offer settings: %w", err)
	}
	p.settings, p.seq = st.Settings, st.Seq
	return p, nil
}

// SetAvailability is the GPU monitor's callback.
func (p *Publisher) SetAvailability(a attest.Availability) {
	p.mu.Lock()
	p.avail = a
	hook := p.onAvail
	p.mu.Unlock()
	if hook != nil {
		hook(a)
	}
	p.Poke()
}

// Poke asks the run loop to publish soon, without waiting for the
// re-announcement.
func (p *Publisher) Poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// SetBookings installs where the offer's bookings come from: the job
// runner's scheduler. Run then watches it and republishes when they change.
func (p *Publisher) SetBookings(f func(now time.Time) []auction.Booking) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bookings = f
}

// SetBronze installs where the offer's Bronze comes from (the
// scheduler's bronze leases); it is watched and republished like the
// bookings.
func (p *Publisher) SetBronze(f func(now time.Time) []auction.Booking) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bronze = f
}

// SetDatasets makes f the source of the offer's Datasets: at most
// auction.MaxDatasets CIDs this node holds and serves. A change is
// published like a change of bookings.
func (p *Publisher) SetDatasets(f func() []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.datasets = f
}

// heldDatasets is the datasets source's answer, capped and sorted so that
// an unchanged store gives an unchanged offer. Called with p.mu held.
func (p *Publisher) heldDatasets() []string {
	if p.datasets == nil {
		return nil
	}
	ds := p.datasets()
	slices.Sort(ds)
	ds = slices.Compact(ds)
	if len(ds) > auction.MaxDatasets {
		ds = ds[:auction.MaxDatasets]
	}
	return ds
}

// Refresh asks Run to compare the bookings with the offer's at once
// rather than at its next poll, say after a claim or a release; it
// republishes only if they changed, and as rarely as bookingsGap allows.
func (p *Publisher) Refresh() {
	select {
	case p.refresh <- struct{}{}:
	default:
	}
}

// OfferHorizon is how far ahead of its issue an offer's windows and
// bookings reach.
const OfferHorizon = 7 * 24 * time.Hour

// Bookings are compared at once when the job runner calls Refresh (after
// a claim or a release), and by polling, which publishes what a Refresh
// had to leave for later and coalesces a burst of awards into one
// publication: an offer carries them within bookingsPoll of a change.
// How soon a change is published after the last publication is the
// market's rule, shared with the simulator: auction.BookingsGap, and
// auction.FreedGap for a change that frees GPUs (auction/bookings_pace.go
// says why the two differ).
const (
	bookingsPoll = 2 * time.Second
	bookingsGap  = auction.BookingsGap
	freedGap     = auction.FreedGap
)

// compareBookings reports whether the published offer's bookings (bronze
// ones included) differ from the scheduler's to the offer's horizon, and
// whether they show GPUs booked that the scheduler has freed
// (auction.Offer.BookingsChanged).
func (p *Publisher) compareBookings() (changed, freed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current == nil {
		return false, false
	}
	now := p.now()
	// A list with no source (not set yet) is taken as published.
	read := func(source func(time.Time) []auction.Booking, published []auction.Booking) []auction.Booking {
		if source == nil {
			return published
		}
		return source(now.Truncate(time.Second))
	}
	return p.current.BookingsChanged(read(p.bookings, p.current.Booked), read(p.bronze, p.current.Bronze), now, OfferHorizon)
}

// minPublishGap keeps an honest provider far below renters' flood limit and
// makes gossip reordering of its own offers practically impossible.
const minPublishGap = time.Second

// An offer published while the provider's topic has no peer reaches no
// one, and the next publication is due 55 minutes later. That is what
// becomes of the first offer after a start: it goes out before the
// bootstrap or known peers have joined the topic. So while the last
// publication reached no peer, Run looks every reachPoll for peers in the
// topic and, once there are, publishes that offer again, at most once per
// reachGap however many connect. The offer as it was (a re-announcement,
// not an update: changes keep their own pace, bookingsGap), under the
// next sequence number, so that the peers that fetched it on connect
// (Market.connectLoop) forward it too. From the first peer on the mesh
// carries it, and a peer that connects later fetches it itself: an offer
// that reached someone is not published again for each newcomer, which
// would cost the whole network a message per connection.
const (
	reachPoll = time.Second
	reachGap  = 5 * time.Second
)

// reachedNoOne: the offer is live (and not about to expire: the
// re-announcement is due then), its last publication reached no peer, the
// topic has peers now, and reachGap has passed since the last publication
// for them.
func (p *Publisher) reachedNoOne() bool {
	p.mu.Lock()
	cur, reached, at := p.current, p.reached, p.reachAt
	p.mu.Unlock()
	if cur == nil || reached > 0 || time.Since(at) < reachGap || cur.ExpiresAt <= p.now().Add(reachGap).Unix() {
		return false
	}
	t, err := p.m.topic(cur.Region.Continent)
	return err == nil && len(t.ListPeers()) > 0
}

// Update applies a change to the settings and persists it; the caller
// publishes.
func (p *Publisher) Update(change func(Settings) (Settings, error)) (Settings, error) {
	p.mu.Lock()
	next, err := change(p.settings)
	if err == nil {
		err = p.store.SaveState(State{Settings: next, Seq: p.seq})
	}
	if err == nil {
		p.settings = next
	}
	p.mu.Unlock()
	if err != nil {
		return Settings{}, err
	}
	return next, nil
}

// Run publishes whenever something changed and re-announces at 11/12 of
// the offer's lifetime (55 minutes of the default hour), until ctx ends.
// Re-announcing rarely is what keeps gossip within budget at scale; see
// docs/ARCHITECTURE.md.
func (p *Publisher) Run(ctx context.Context) {
	reannounce := time.NewTimer(0)
	defer reannounce.Stop()
	poll := time.NewTicker(bookingsPoll)
	defer poll.Stop()
	reach := time.NewTicker(reachPoll)
	defer reach.Stop()
	// freedAt fires when freedGap has passed since the last publication,
	// armed by a freed change that came too soon after it: the poll alone
	// would see it only on its next tick, up to bookingsPoll later.
	freedAt := time.NewTimer(time.Hour)
	freedAt.Stop()
	defer freedAt.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-reannounce.C:
		case <-reach.C:
			if !p.reachedNoOne() {
				continue
			}
			p.mu.Lock()
			p.reachAt = time.Now()
			p.mu.Unlock()
			// The same offer: its expiry, hence the re-announcement, stands.
			if err := p.publish(ctx, true); err != nil {
				p.log.Warn("offer not published again for the peers that joined", "err", err)
			}
			continue
		case <-poll.C:
			if !p.bookingsDue(freedAt) {
				continue
			}
		case <-p.refresh:
			if !p.bookingsDue(freedAt) {
				continue
			}
		case <-freedAt.C:
			if !p.bookingsDue(freedAt) {
				continue
			}
		}
		if err := p.Publish(ctx); err != nil {
			p.log.Warn("offer not published", "err", err)
		}
		reannounce.Reset(p.ttl * 11 / 12)
	}
}

// bookingsDue: the bookings changed and bookingsGap has passed since the
// last publication, or freedGap where the change frees GPUs. A freed
// change that came sooner arms freedAt for when freedGap has passed;
// anything else waits for the next poll.
func (p *Publisher) bookingsDue(freedAt *time.Timer) bool {
	p.publishMu.Lock()
	since := time.Since(p.lastPublish)
	p.publishMu.Unlock()
	changed, freed := p.compareBookings()
	if freed {
		if since >= freedGap {
			return true
		}
		freedAt.Reset(freedGap - since)
		return false
	}
	return since >= bookingsGap && (changed || p.datasetsChanged())
}

// datasetsChanged reports whether the store's pins differ from the
// published offer's datasets.
func (p *Publisher) datasetsChanged() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current != nil && p.datasets != nil && !slices.Equal(p.heldDatasets(), p.current.Datasets)
}

// Publish signs the current offer, or a withdrawal if the node offered
// something before and offers nothing now, and gossips it.
func (p *Publisher) Publish(ctx context.Context) error { return p.publish(ctx, false) }

// publish is Publish, or with again the offer last published once more,
// as it was but under the next sequence number (nothing if it was a
// withdrawal): Run's publication for peers that joined after it.
func (p *Publisher) publish(ctx context.Context, again bool) error {
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
	var o *auction.Offer
	var reason string
	switch {
	case again && p.current == nil:
		p.mu.Unlock()
		return nil
	case again:
		same := *p.current
		o, reason = &same, p.reason
	default:
		o, reason = p.build()
	}
	if o == nil && p.current == nil {
		p.reason = reason
		p.mu.Unlock()
		return nil
	}
	if o == nil { // withdraw what was offered
		w := *p.current
		w.Withdrawn, w.Windows, w.Booked, w.Bronze = true, nil, nil, nil
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
		err = p.store.SaveState(State{Settings: p.settings, Seq: o.Seq})
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
	// Flood publishing sends it to every peer of the topic we know of.
	reached := len(t.ListPeers())
	p.mu.Lock()
	p.reached = reached
	p.mu.Unlock()
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
func (p *Publisher) build() (*auction.Offer, string) {
	s := p.settings
	if p.stopping {
		return nil, "this node is stopping"
	}
	if s.Paused {
		return nil, "paused by the owner (gleaner offer resume)"
	}
	if err := s.Ready(); err != nil {
		return nil, err.Error()
	}
	if p.gpuErr != nil {
		return nil, p.gpuErr.Error()
	}
	// Available holds device indexes, not positions in the inventory: a
	// host whose GPUs are not numbered 0..n-1 (one skipped, a subset made
	// visible) must offer the GPUs the owner's rules allowed.
	allowed := make(map[int]bool, len(p.avail.Available))
	for _, i := range p.avail.Available {
		allowed[i] = true
	}
	var gpus []auction.GPU
	for _, g := range p.avail.Inventory.GPUs {
		if allowed[g.Index] {
			gpus = append(gpus, offerGPU(g))
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
	var booked, bronze []auction.Booking
	if p.bookings != nil {
		booked = auction.NormalizeBookings(p.bookings(now), len(gpus), now.Unix(), now.Add(OfferHorizon).Unix())
	}
	if p.bronze != nil {
		bronze = auction.NormalizeBookings(p.bronze(now), len(gpus), now.Unix(), now.Add(OfferHorizon).Unix())
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
		Booked:    booked,
		Bronze:    bronze,
		Policy:    s.Policy,
		Addrs:     addrStrings(p.m.host.Addrs()),
		Calendar:  &s.Calendar,
		Pricing:   s.OfferPricing(),
		Datasets:  p.heldDatasets(),
	}, ""
}

// provide announces the offer's capability keys in the DHT when they
// changed since the last time, so renters that join late can find it.
func (p *Publisher) provide(ctx context.Context, o *auction.Offer) {
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

// Withdraw publishes a signed withdrawal on shutdown, so renters drop the
// offer now instead of at its expiry.
func (p *Publisher) Withdraw(ctx context.Context) {
	// Not by pausing: Publish saves the settings, and a daemon stopped
	// once would come back paused, selling nothing until its owner
	// noticed.
	p.mu.Lock()
	p.stopping = true
	offered := p.current != nil
	p.mu.Unlock()
	if offered {
		if err := p.Publish(ctx); err != nil {
			p.log.Warn("withdrawal not published", "err", err)
		}
	}
	p.mu.Lock()
	p.stopping = false
	p.mu.Unlock()
}

// CurrentRaw is what /offer/1 serves: the live offer only, never a
// withdrawal (a late joiner has nothing to remove).
func (p *Publisher) CurrentRaw() []byte {
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

func addrStrings(as []ma.Multiaddr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

// Market is the market whose topics p publishes on.
func (p *Publisher) Market() *Market { return p.m }

// Current is the offer now published, nil when nothing is offered.
func (p *Publisher) Current() *auction.Offer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}

// Settings are the owner's current settings.
func (p *Publisher) Settings() Settings {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settings
}

// Availability is the GPU monitor's latest report.
func (p *Publisher) Availability() attest.Availability {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.avail
}

// Seq is the last sequence number signed.
func (p *Publisher) Seq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq
}

// Limits is the monitor's view of the owner's current limits.
func (p *Publisher) Limits() attest.Limits {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settings.Limits
}

// SetGPUError records why this node has no GPUs to sell; build reports it
// as the reason nothing is offered.
func (p *Publisher) SetGPUError(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gpuErr = err
}

// WatchAvailability calls first with the current availability and installs
// hook for every later change, both under p's lock, so that the watcher
// misses no change and sees none out of order.
func (p *Publisher) WatchAvailability(first, hook func(attest.Availability)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first(p.avail)
	p.onAvail = hook
}

// Status is one consistent view of the publisher, for offer_show.
type Status struct {
	Current      *auction.Offer // nil when nothing is offered
	Settings     Settings
	Reason       string // why nothing is offered, when nothing is
	GPUErr       error  // why there are no GPUs to sell, when there are none
	Availability attest.Availability
}

// Status reports the publisher's state under one lock.
func (p *Publisher) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{Current: p.current, Settings: p.settings, GPUErr: p.gpuErr, Availability: p.avail}
	if p.current == nil {
		st.Reason = p.reason
		if st.Reason == "" {
			_, st.Reason = p.build()
		}
	}
	return st
}
