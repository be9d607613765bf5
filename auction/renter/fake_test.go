package renter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The fakes: providers that quote with real signed bids (auction.BidEngine,
// auction.SignBid) and accept awards as node's provider does, an in-memory
// network between them and a renter, and a manual clock. No libp2p.

// t0 is a fixed "now": Thu 2026-03-26 12:00 UTC.
var t0 = time.Date(2026, 3, 26, 12, 0, 0, 0, time.UTC)

const testNetwork = "testnet"

type seededReader struct{ r *rand.Rand }

func (s seededReader) Read(p []byte) (int, error) { return s.r.Read(p) }

// testKey is a deterministic Ed25519 key and its peer ID.
func testKey(t testing.TB, seed int64) (crypto.PrivKey, string) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(seededReader{rand.New(rand.NewSource(seed))})
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id.String()
}

// fakeProvider is a provider as the renter sees it over the wire. Its
// knobs are set before the market is used.
type fakeProvider struct {
	key    crypto.PrivKey
	id     string
	offer  *auction.Offer
	engine auction.BidEngine
	gpus   []string // the GPUs' UUID hashes, in index order
	clock  Clock

	decline    string                                                                          // decline every quote with this reason
	refuse     string                                                                          // refuse every award with this reason
	mutate     func(*auction.Bid)                                                              // alter a bid before it is signed
	hang       bool                                                                            // never answer a quote; wait for the caller to give up
	afterQuote func(jobID string)                                                              // runs after a quote is answered, outside mu
	relay      func(ctx context.Context, jobID string, nonce, specYAML []byte) ([]byte, error) // answer quotes with these bytes instead

	mu        sync.Mutex        // guards what follows
	busyUntil time.Time         // declines every quote as busy until then (a preemptor's better job)
	used      map[string]string // GPU hash -> the job whose lease holds it
	leases    map[string][]byte // job ID -> co-signed lease
	quotes    int
	awards    int
}

func newFakeProvider(t testing.TB, seed int64, floor auction.Credits, gpus int, clock Clock) *fakeProvider {
	key, id := testKey(t, seed)
	iss := clock.Now().Unix() - 600
	o := &auction.Offer{
		Provider: id, Network: testNetwork, Seq: 1, IssuedAt: iss, ExpiresAt: iss + 4*3600,
		Host:    auction.Host{CPUs: 64, MemoryMiB: 512 << 10},
		Region:  auction.Region{Country: "DE", Continent: "eu"},
		Prices:  auction.Prices{Gold: floor * 2, Silver: floor * 3 / 2, Bronze: floor},
		Windows: []auction.Window{{Start: iss, End: iss + 30*3600}},
		Policy:  auction.Policy{Workloads: []string{"batch"}, PreemptNotice: 60},
	}
	for i := range gpus {
		h := fmt.Sprintf("%x-gpu%d", seed, i)
		o.GPUs = append(o.GPUs, auction.GPU{Model: "H100", VRAMMiB: 81559, ComputeCap: "9.0", UUIDHash: h})
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	return fakeProviderFor(key, o, clock)
}

// fakeProviderFor sells o, which key's peer signs; its GPUs are named by
// their UUIDHash, or by their index where the offer names none.
func fakeProviderFor(key crypto.PrivKey, o *auction.Offer, clock Clock) *fakeProvider {
	p := &fakeProvider{key: key, id: o.Provider, offer: o, clock: clock, used: map[string]string{}, leases: map[string][]byte{}}
	for i, g := range o.GPUs {
		h := g.UUIDHash
		if h == "" {
			h = fmt.Sprintf("gpu%d", i)
		}
		p.gpus = append(p.gpus, h)
	}
	return p
}

// quote answers as node's provider does: the bid engine's price for its
// offer and utilisation, the first free GPUs named (without holding them:
// concurrent quotes name the same GPUs, and all but one award then races),
// signed.
func (p *fakeProvider) quote(ctx context.Context, jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	p.mu.Lock()
	p.quotes++
	p.mu.Unlock()
	if p.hang {
		<-ctx.Done()
		return nil, "", ctx.Err()
	}
	if p.afterQuote != nil {
		defer p.afterQuote(jobID)
	}
	if p.relay != nil {
		raw, err := p.relay(ctx, jobID, nonce, specYAML)
		return raw, "", err
	}
	if p.decline != "" {
		return nil, p.decline, nil
	}
	spec, err := auction.ParseJobSpec(specYAML)
	if err != nil {
		return nil, "bad job spec: " + err.Error(), nil
	}
	p.mu.Lock()
	if p.clock.Now().Before(p.busyUntil) {
		p.mu.Unlock()
		return nil, auction.ReasonBusy, nil
	}
	util := float64(len(p.used)) / float64(len(p.gpus))
	var plan []string
	for _, h := range p.gpus {
		if _, taken := p.used[h]; !taken && len(plan) < spec.Resources.GPUs {
			plan = append(plan, h)
		}
	}
	p.mu.Unlock()
	bid, decl := p.engine.Quote(spec, p.offer, util, p.clock.Now())
	if decl != nil {
		return nil, decl.Reason, nil
	}
	if len(plan) < bid.GPUs {
		return nil, auction.ReasonBusy, nil
	}
	bid.JobID, bid.Nonce, bid.GPUHashes = jobID, nonce, plan
	if p.mutate != nil {
		p.mutate(&bid)
	}
	sb, err := auction.SignBid(&bid, p.key)
	if err != nil {
		return nil, "cannot sign bid: " + err.Error(), nil
	}
	raw, err := sb.Marshal()
	return raw, "", err
}

// award checks the proposal as node's provider does (node/providing's
// accept, auction/provider.HonoursBid) and claims the GPUs its bid named,
// refusing with RefusedRaced when another award took one of them first.
func (p *fakeProvider) award(from string, proposal []byte) ([]byte, string) {
	l, sl, err := auction.DecodeSignedLease(proposal, false)
	if err != nil {
		return nil, err.Error()
	}
	if l.Provider != p.id || l.Renter != from || l.Network != testNetwork {
		return nil, "the lease names other parties or another network"
	}
	bid, _, err := auction.DecodeSignedBid(l.Bid, p.clock.Now())
	if err != nil {
		return nil, "the lease's bid: " + err.Error()
	}
	if bid.Provider != p.id {
		return nil, "the lease's bid is not ours"
	}
	if err := honoursBid(l, bid, p.clock.Now()); err != nil {
		return nil, err.Error()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.awards++
	if p.refuse != "" {
		return nil, p.refuse
	}
	if held, dup := p.leases[l.JobID]; dup {
		if _, hs, err := auction.ReadLease(held); err == nil && bytes.Equal(hs.Body, sl.Body) {
			return held, ""
		}
		return nil, "a lease for this job exists already"
	}
	for _, h := range bid.GPUHashes {
		if !slices.Contains(p.gpus, h) {
			return nil, "the GPUs of our bid are no longer in this machine"
		}
		if _, taken := p.used[h]; taken {
			return nil, RefusedRaced
		}
	}
	if err := sl.CounterSign(p.key); err != nil {
		return nil, err.Error()
	}
	raw, err := sl.Marshal()
	if err != nil {
		return nil, err.Error()
	}
	for _, h := range bid.GPUHashes {
		p.used[h] = l.JobID
	}
	p.leases[l.JobID] = raw
	return raw, ""
}

func (p *fakeProvider) counts() (quotes, awards, used int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.quotes, p.awards, len(p.used)
}

// honoursBid is auction/provider.HonoursBid's check, copied: the lease repeats
// the bid in every field the bid fixes, at no lower price.
func honoursBid(l *auction.Lease, bid *auction.Bid, now time.Time) error {
	if bid.JobID != l.JobID || bid.Tier != l.Tier || l.Price < bid.Price || l.GPUs != bid.GPUs ||
		len(bid.GPUHashes) != l.GPUs || !slices.Equal(l.GPUUUIDHash, bid.GPUHashes) {
		return errors.New("the lease does not honour our bid")
	}
	if len(bid.SpecHash) == 0 || !bytes.Equal(l.SpecHash, bid.SpecHash) {
		return errors.New("the lease names another job spec than the one we quoted")
	}
	if l.NoticeSec != bid.NoticeSec {
		return fmt.Errorf("the lease asks for %d s of notice; we quoted %d s", l.NoticeSec, bid.NoticeSec)
	}
	if l.End-l.Start > bid.DurationSec {
		return errors.New("the lease runs longer than we quoted")
	}
	if l.Tier == auction.Gold {
		if l.Start != bid.Start {
			return errors.New("the lease starts at another time than our reservation")
		}
		return nil
	}
	if l.Start < bid.Start || time.Unix(l.Start, 0).After(now.Add(60*time.Second)) {
		return errors.New("work that starts now cannot start before our quote or in the future")
	}
	return nil
}

// fakeNet connects renters to fake providers by peer ID.
type fakeNet struct{ providers map[string]*fakeProvider }

// fakeTransport is one renter's end of a fakeNet.
type fakeTransport struct {
	net  *fakeNet
	from string
}

func (t fakeTransport) Quote(ctx context.Context, provider, jobID string, nonce, specYAML []byte) ([]byte, string, error) {
	p := t.net.providers[provider]
	if p == nil {
		return nil, "", errors.New("no route to " + provider)
	}
	return p.quote(ctx, jobID, nonce, specYAML)
}

func (t fakeTransport) Award(ctx context.Context, provider string, proposal []byte) ([]byte, string, error) {
	p := t.net.providers[provider]
	if p == nil {
		return nil, "", errors.New("no route to " + provider)
	}
	raw, refusal := p.award(t.from, proposal)
	return raw, refusal, nil
}

// fakeBook is a fixed offer book.
type fakeBook []*auction.Offer

func (b fakeBook) Snapshot() []*auction.Offer { return slices.Clone(b) }

// fakeTrust is read-only once a test starts.
type fakeTrust struct {
	rep       map[string]float64
	convicted map[string]bool
	rtt       map[string]time.Duration
}

func (f fakeTrust) Score(p string) float64 {
	if s, ok := f.rep[p]; ok {
		return s
	}
	return 0.5
}
func (f fakeTrust) Convicted(p string) bool                    { return f.convicted[p] }
func (f fakeTrust) RTT(p string) (d time.Duration, known bool) { d, known = f.rtt[p]; return }
