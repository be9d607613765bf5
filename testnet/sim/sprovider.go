package sim

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// simProvider is one provider node: the real scheduler and desk
// (auction/provider) with the node's adapter duties done in virtual time:
// it publishes its offer when bookings change and before it expires,
// launches and stops jobs as the scheduler's actions say, meters running
// time, takes vouchers and settles.
type simProvider struct {
	m       *market
	idx     int
	sp      *Provider
	key     crypto.PrivKey
	id      string
	engine  auction.BidEngine
	sched   *sched.Scheduler
	desk    *sched.Desk
	windows []auction.Window

	offer     *auction.Offer // the one it quotes from (its own, current)
	seq       uint64
	offerSize int64 // the signed offer's wire size, as last published
	pending   bool  // a publish is scheduled
	pendingAt time.Duration
	lastPub   time.Duration

	leases map[string]*provLease
	tickAt time.Duration // when a Tick is scheduled; -1 none
}

// provLease is the adapter's record of one lease.
type provLease struct {
	l       *auction.Lease
	job     *simJob
	gen     int           // bumps when the planned exit moves (pause, stop)
	running bool          // the container runs
	paused  bool          // paused for want of a voucher
	since   time.Duration // running and unpaused since
	worked  time.Duration // running, unpaused time before since
	start   time.Duration // the container started
	total   auction.Credits
	ending  bool
}

func newSimProvider(m *market, idx int) (*simProvider, error) {
	sp := &m.supply.Providers[idx]
	key, id, err := m.keyFor("provider", idx)
	if err != nil {
		return nil, err
	}
	p := &simProvider{m: m, idx: idx, sp: sp, key: key, id: id, leases: map[string]*provLease{}, tickAt: -1,
		sched: sched.New(sched.WithStartDeadline(m.cfg.StartDeadline))}
	p.engine.Hash = m.specs.hash
	p.desk = &sched.Desk{Engine: &p.engine, Sched: p.sched, Key: key, Self: id, Network: simNetwork, Parse: m.specs.parse}
	inv := attest.Inventory{Simulated: true, Source: "simulated"}
	av := attest.Availability{}
	for i := range sp.GPUs {
		inv.GPUs = append(inv.GPUs, attest.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", sp.ID, i), Model: sp.Model,
			VRAMMiB: sp.VRAMMiB, ComputeCap: "8.0", Simulated: true})
		av.Available = append(av.Available, i)
	}
	av.Inventory = inv
	now := m.w.Now()
	p.sched.SetAvailability(av, now)
	for _, s := range sp.Windows {
		p.windows = append(p.windows, auction.Window{Start: At(s.Start).Unix(), End: At(s.End).Unix()})
	}
	p.sched.SetWindows(p.windows, now)
	p.sched.SetNotice(m.cfg.Notice)
	return p, nil
}

// buildOffer is the offer as node's publisher builds it: GPUs, region,
// floors, the windows of the next OfferHorizon, the bookings, the policy.
func (p *simProvider) buildOffer() *auction.Offer {
	now := p.m.w.Now().Truncate(time.Second)
	from, to := now.Unix(), now.Add(offerHorizon).Unix()
	var ws []auction.Window
	for _, w := range p.windows {
		if w.End > from && w.Start < to {
			ws = append(ws, auction.Window{Start: max(w.Start, from), End: min(w.End, to)})
		}
	}
	gpus := make([]auction.GPU, p.sp.GPUs)
	for i := range gpus {
		gpus[i] = auction.GPU{Model: p.sp.Model, VRAMMiB: p.sp.VRAMMiB, ComputeCap: "8.0",
			UUIDHash: attest.UUIDHash(fmt.Sprintf("GPU-%s-%d", p.sp.ID, i)), Simulated: true}
	}
	p.seq++
	return &auction.Offer{
		Provider: p.id, Network: simNetwork, Seq: p.seq, IssuedAt: from, ExpiresAt: now.Add(p.m.cfg.OfferTTL).Unix(),
		GPUs: gpus, Host: auction.Host{CPUs: 8 * p.sp.GPUs, MemoryMiB: 32768 * p.sp.GPUs},
		Region: auction.Region{Country: p.sp.Country, Continent: p.sp.Continent}, Prices: p.sp.Floors, Windows: ws,
		Booked: auction.NormalizeBookings(p.sched.Booked(now, offerHorizon), len(gpus), from, to),
		Bronze: auction.NormalizeBookings(p.sched.BronzeHeld(now, offerHorizon), len(gpus), from, to),
		Policy: auction.Policy{Workloads: offerWorkloads, PreemptNotice: int64(p.m.cfg.Notice / time.Second)},
	}
}

// offerWorkloads is every offer's policy.workloads, one list that nothing
// writes: a renter's policy check reads it from each of thousands of
// offers a round, and one shared list stays in cache where a copy per
// offer was a cache miss each (issue 33).
var offerWorkloads = []string{"batch", "service"}

// publish signs and gossips a fresh offer; renters' books see it after
// the gossip delay. It is what the node does on a change (at most every
// bookingsGap) and before expiry.
func (p *simProvider) publish() {
	p.pending = false
	p.lastPub = p.m.w.now
	o := p.buildOffer()
	size, err := offerWireSize(o)
	if err != nil {
		p.m.fail(fmt.Errorf("provider %s: offer: %w", p.sp.ID, err))
		return
	}
	p.offer, p.offerSize = o, size
	p.m.traffic.publish(p.sp.Continent, p.offerSize)
	p.m.w.after(p.m.net.GossipDelay, func() { p.m.book.put(o) })
}

// offerWireSize is the size of o signed, on the wire: the envelope with
// o's body and an Ed25519 signature. The simulator counts gossip with it
// instead of signing every offer, since no simulated renter checks an
// offer's signature (it cost 7% of a 10,000-provider run's CPU);
// TestOfferWireSizeIsTheSignedOffers holds it to auction.SignOffer's.
// The offer is validated as SignOffer validates it.
func offerWireSize(o *auction.Offer) (int64, error) {
	if err := o.Validate(); err != nil {
		return 0, err
	}
	body, err := o.Encode()
	if err != nil {
		return 0, err
	}
	raw, err := (&auction.SignedOffer{Body: body, Sig: unsignedSig[:]}).Marshal()
	return int64(len(raw)), err
}

// unsignedSig stands in for an offer's signature: Ed25519's are all this long.
var unsignedSig [ed25519.SignatureSize]byte

// changed schedules a publish for a change of bookings, if the offer
// published last no longer shows them (auction.CompareBookings: a change
// within BookingsSlack of now is none): at once, or when bookingsGap has
// passed since the last one, freedGap where the offer shows GPUs booked
// that the scheduler has freed (node's publisher's rule). A publish
// scheduled for later is brought forward.
func (p *simProvider) changed() {
	if p.pending && p.pendingAt <= max(p.lastPub+freedGap, p.m.w.now) {
		return // as soon as it can be
	}
	changed, freed := p.compareBookings()
	if !changed {
		return
	}
	due := p.lastPub + bookingsGap
	if freed {
		due = p.lastPub + freedGap
	}
	due = max(due, p.m.w.now)
	if p.pending && p.pendingAt <= due {
		return
	}
	p.pending, p.pendingAt = true, due
	p.m.w.at(due, func() {
		if p.pending && p.pendingAt == due { // not published since, nor brought forward
			p.publish()
		}
	})
}

// reannounce republishes shortly before the offer expires, as node does.
func (p *simProvider) reannounce() {
	p.publish()
	p.m.w.after(p.m.cfg.OfferTTL*11/12, p.reannounce)
}

func (p *simProvider) quote(specYAML []byte, jobID, renter string, nonce []byte) ([]byte, string) {
	return p.desk.Quote(specYAML, jobID, renter, nonce, p.offer, p.m.w.Now())
}

// award is /lease/1 on the provider's side: node's accept without the
// disk. A refusing adversary refuses what it won.
func (p *simProvider) award(proposal []byte, from string) ([]byte, string) {
	if p.sp.Behaviour == Refuse {
		return nil, "no longer available"
	}
	now := p.m.w.Now()
	aw, err := p.desk.CheckAward(proposal, from, now)
	if err != nil {
		return nil, err.Error()
	}
	if p.leases[aw.Lease.JobID] != nil {
		return nil, sched.ErrDuplicate.Error()
	}
	if err := aw.Signed.CounterSign(p.key); err != nil {
		return nil, err.Error()
	}
	raw, err := aw.Signed.Marshal()
	if err != nil {
		return nil, err.Error()
	}
	// Newcomers' awards left unstarted in the way end first, settled and
	// released, as node's accept does (auction/provider's newcomer rule).
	p.do(p.sched.Displace(aw.Lease, aw.GPUs, now))
	victims, err := p.sched.Claim(aw.Lease, aw.GPUs, now)
	if errors.Is(err, sched.ErrRaced) {
		return nil, auction.RefusedRaced
	}
	if err != nil {
		return nil, err.Error()
	}
	job := p.m.jobs[aw.Lease.JobID]
	p.leases[aw.Lease.JobID] = &provLease{l: aw.Lease, job: job}
	p.m.feedAppend()
	p.do(victims)
	p.changed()
	p.reschedule()
	return raw, ""
}

// start is the renter's start of its lease (/job/3).
func (p *simProvider) start(jobID string) error {
	acts, err := p.sched.Start(jobID, p.m.w.Now())
	if err != nil {
		return err
	}
	p.do(acts)
	p.reschedule()
	// A newcomer's award is left out of the bookings until it starts
	// (displaceable, auction/provider's newcomer rule): its start books
	// the GPUs, which node's publisher sees on its next poll of the
	// bookings. Without it the offer showed them free until the lease's
	// end, and every quote asked there was declined as fully utilised.
	p.changed()
	return nil
}

// compareBookings is node's publisher's test (auction.Offer.BookingsChanged):
// whether the scheduler's bookings, bronze ones included, differ from
// those of the offer published last, to that offer's horizon (from its
// issue, as node's), and whether that offer shows GPUs booked that the
// scheduler has freed.
func (p *simProvider) compareBookings() (changed, freed bool) {
	if p.offer == nil {
		return false, false
	}
	now := p.m.w.Now()
	return p.offer.BookingsChanged(p.sched.Booked(now, offerHorizon), p.sched.BronzeHeld(now, offerHorizon), now, offerHorizon)
}

// paid takes a cumulative voucher.
func (p *simProvider) paid(jobID string, total auction.Credits) {
	pl := p.leases[jobID]
	if pl == nil || pl.ending {
		return
	}
	pl.total = max(pl.total, total)
	if err := p.sched.PaidTotal(jobID, pl.total); err == nil {
		p.reschedule()
	}
}

// reschedule keeps one Tick event at the scheduler's Due.
func (p *simProvider) reschedule() {
	due := p.sched.Due()
	if due.IsZero() {
		return
	}
	at := max(due.Sub(Epoch), p.m.w.now)
	if p.tickAt >= 0 && p.tickAt <= at {
		return
	}
	p.tickAt = at
	p.m.w.at(at, func() {
		if p.tickAt != at {
			return
		}
		p.tickAt = -1
		p.do(p.sched.Tick(p.m.w.Now()))
		p.reschedule()
	})
}
