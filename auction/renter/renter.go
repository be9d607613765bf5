package renter

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Transport carries the two exchanges of an auction, one request and one
// reply each, so that node's libp2p adapter maps every call onto one
// stream of the existing protocols and the wire does not change.
type Transport interface {
	// Quote is /auction/1: quoteRequest{JobID, Nonce, Spec: specYAML} to
	// provider, answered by quoteReply{Bid, Decline}. It returns the signed
	// bid's wire bytes, or the provider's decline reason; err is for a
	// provider that could not be reached or did not answer in time.
	Quote(ctx context.Context, provider, jobID string, nonce, specYAML []byte) (bid []byte, decline string, err error)
	// Award is /lease/1: awardRequest{Lease: proposal} to provider,
	// answered by awardReply{Lease, Refused}. It returns the co-signed
	// lease's wire bytes, or the provider's refusal.
	Award(ctx context.Context, provider string, proposal []byte) (cosigned []byte, refusal string, err error)
}

// Releaser is a Transport that can also tell a provider to drop the hold
// its quote placed (auction/provider's quote holds): a renter that awarded
// another provider, or gave the round up, frees the GPUs the losing quotes
// named at once rather than when the holds lapse. It is optional, so that
// transports without it (fakes, older adapters) keep working: the holds
// then lapse by themselves.
type Releaser interface {
	// Release asks provider to drop the hold of its quote for jobID under
	// the round's nonce. It must not block: the auctioneer calls it on the
	// result's path, and delivery is best effort (a release that is lost
	// costs the provider the hold's lifetime, no more). node sends it on
	// /auction/1 as a QuoteRequest with Release set, in a task of its own.
	Release(ctx context.Context, provider, jobID string, nonce []byte) error
}

// Offers is the offer book as the renter knows it.
type Offers interface {
	// Snapshot returns the offers known now in a slice the caller owns
	// (it filters the slice in place); the offers themselves are shared
	// and never modified.
	Snapshot() []*auction.Offer
}

// Trust is what the renter's node knows of providers beyond their offers.
// All methods may be called from several goroutines at once. A Trust
// that also implements Tracker (track records: leases, probes) opens
// small-job rounds to newcomers; see newcomer.go.
type Trust interface {
	auction.Reputation // Score: 0 (worst) to 1 (best)
	// Convicted reports an objective fraud proof against provider: it is
	// never asked for a quote.
	Convicted(provider string) bool
	// RTT is the measured round trip to provider; false when unmeasured.
	RTT(provider string) (time.Duration, bool)
}

// neutralTrust is the Trust of a renter that knows nothing yet.
type neutralTrust struct{ auction.NeutralReputation }

func (neutralTrust) Convicted(string) bool            { return false }
func (neutralTrust) RTT(string) (time.Duration, bool) { return 0, false }

// Identity is the renter as its leases name it.
type Identity struct {
	Peer    string         // the renter's peer ID
	Network string         // the network its leases are for
	Key     crypto.PrivKey // the key of Peer; signs every proposal
}

// Auction defaults, as node has always used them. K bounds the work a
// renter asks of the market per round; the deadlines bound how long a slow
// provider can hold a round up.
const (
	DefaultCandidates    = 5
	DefaultQuoteDeadline = 3 * time.Second
	DefaultAwardDeadline = 10 * time.Second
)

// RefusedRaced is the refusal of a provider whose bid's GPUs went to
// another award between quote and award. It is a wire string (awardReply's
// Refused), matched exactly: the renter then quotes again at once, since
// capacity may well be free.
const RefusedRaced = auction.RefusedRaced

// Auctioneer runs a renter's auctions. It holds no per-job state and is
// safe for concurrent use: every call to Auction or Place is independent,
// but for the count of small-job rounds that opens one in every
// newcomerEvery to newcomers.
type Auctioneer struct {
	id         Identity
	transport  Transport
	offers     Offers
	trust      Trust
	clock      Clock
	candidates int
	quoteWait  time.Duration
	awardWait  time.Duration
	nonces     io.Reader
	parse      func([]byte) (*auction.JobSpec, error)
	hash       func(*auction.JobSpec) ([]byte, error)
	prober     Prober        // nil: RTTs are trust's alone (rtt.go)
	rttWait    time.Duration // a probe's deadline; see probeWait

	newcomerEvery int
	smallRounds   atomic.Uint64 // small-job rounds that ranked a bid, with newcomers possible
	noDiagnosis   bool          // WithoutDiagnosis
	payAsBid      bool          // WithPayAsBid
}

// Option configures an Auctioneer.
type Option func(*Auctioneer)

// WithTrust sets the reputation, convictions and round trips; the default
// is neutral: every provider scores 0.5, none is convicted, no RTT known.
func WithTrust(t Trust) Option { return func(a *Auctioneer) { a.trust = t } }

// WithClock sets the clock; the default is the wall clock (Wall).
func WithClock(c Clock) Option { return func(a *Auctioneer) { a.clock = c } }

// WithCandidates sets K, how many of the cheapest feasible offers are
// asked for quotes per round (default DefaultCandidates).
func WithCandidates(k int) Option { return func(a *Auctioneer) { a.candidates = k } }

// WithDeadlines sets how long a round waits for quotes and for an award's
// answer (defaults DefaultQuoteDeadline and DefaultAwardDeadline).
func WithDeadlines(quote, award time.Duration) Option {
	return func(a *Auctioneer) { a.quoteWait, a.awardWait = quote, award }
}

// WithNonces sets the source of the quote nonces (default crypto/rand), so
// that a simulation is reproducible.
func WithNonces(r io.Reader) Option { return func(a *Auctioneer) { a.nonces = r } }

// WithSpecParser sets how the auctioneer reads the spec it sends, as the
// providers will, and names it (defaults auction.ParseJobSpec and
// auction.SpecHash). The simulator passes memos of both: the same bytes
// go to every candidate of every round.
func WithSpecParser(parse func([]byte) (*auction.JobSpec, error), hash func(*auction.JobSpec) ([]byte, error)) Option {
	return func(a *Auctioneer) { a.parse, a.hash = parse, hash }
}

// WithoutDiagnosis leaves out what only a person reads: every check each
// listed rejection fails and the change to the spec that would admit the
// most offers (Explain.Rejected[i].All, Explain.Relax). The simulator,
// which runs thousands of rounds nobody reads, passes it.
func WithoutDiagnosis() Option { return func(a *Auctioneer) { a.noDiagnosis = true } }

// WithPayAsBid clears every round at the winner's own bid (RulePayAsBid)
// instead of the second score: the alternative rule the simulator
// measures the second-score rule against (market.clearing). The winner is
// the same; only what it is paid changes. Not for node: under it a
// provider gains by asking more than its floor (see docs/MARKET.md).
func WithPayAsBid() Option { return func(a *Auctioneer) { a.payAsBid = true } }

// New returns an auctioneer for the renter id, asking providers through t
// and choosing among the offers of book. Defaults are applied after the
// options, to whatever they left unset.
func New(id Identity, t Transport, book Offers, opts ...Option) (*Auctioneer, error) {
	if t == nil || book == nil {
		return nil, errors.New("renter: a transport and an offer book are required")
	}
	if id.Key == nil {
		return nil, errors.New("renter: the identity has no signing key")
	}
	if pid, err := peer.IDFromPrivateKey(id.Key); err != nil || pid.String() != id.Peer {
		return nil, errors.New("renter: the identity's key is not its peer's")
	}
	a := &Auctioneer{id: id, transport: t, offers: book}
	for _, o := range opts {
		o(a)
	}
	if a.trust == nil {
		a.trust = neutralTrust{}
	}
	if a.clock == nil {
		a.clock = Wall
	}
	if a.candidates <= 0 {
		a.candidates = DefaultCandidates
	}
	if a.quoteWait <= 0 {
		a.quoteWait = DefaultQuoteDeadline
	}
	if a.awardWait <= 0 {
		a.awardWait = DefaultAwardDeadline
	}
	if a.nonces == nil {
		a.nonces = rand.Reader
	}
	if a.parse == nil {
		a.parse = auction.ParseJobSpec
	}
	if a.hash == nil {
		a.hash = auction.SpecHash
	}
	if a.newcomerEvery == 0 {
		a.newcomerEvery = DefaultNewcomerEvery
	}
	return a, nil
}
