package sim

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// simNetwork names the simulated network in every offer, bid and lease.
const simNetwork = "sim"

// offerHorizon is how far ahead an offer lists windows and bookings, as
// node's publisher does (offers.OfferHorizon).
const offerHorizon = 7 * 24 * time.Hour

// bookingsGap and freedGap are how soon after its last publication a
// provider publishes a change of bookings, and one that frees GPUs: the
// market's rule, node's publisher's too (auction/bookings_pace.go).
const (
	bookingsGap = auction.BookingsGap
	freedGap    = auction.FreedGap
)

// Sizes of messages the simulation counts without building each one: a
// voucher (one real one is ~190 bytes: lease CID, lane, nonce, total, two
// peer IDs, a signature) and a feed head. Ledger entries themselves are
// fetched by the peers that want them, not gossiped, so only their heads
// count toward gossip.
const (
	voucherBytes = 200
	headBytes    = 160
)

// Config is the decentralised market's side of a run: the node's
// defaults where node has one, else what a renter in a simulated week
// would choose; docs/SIM.md lists each.
type Config struct {
	Seed          uint64
	Candidates    int           // K: quotes asked per round (node: 5)
	QuoteDeadline time.Duration // node: 3 s
	AwardDeadline time.Duration // node: 10 s
	Billing       time.Duration // the lease's billing interval
	Pull          time.Duration // launch to running: the image pull and start
	Notice        time.Duration // bronze preemption notice
	Checkpoint    time.Duration // a job keeps its progress at multiples of this
	Patience      time.Duration // a job not placed within this gives up
	Retry         time.Duration // the wait between re-auctions
	// LeaseMargin is what a renter asks beyond the work left: the
	// lease's duration.max is the work plus this (gold: plus a minute).
	LeaseMargin time.Duration
	// Clearing is the auction's payment rule: "second-score" (node's) or
	// "pay-as-bid" (the winner is paid its own bid), to compare them on
	// the same seeds (docs/MARKET.md).
	Clearing      string
	StartDeadline time.Duration // an award not started by then expires
	OfferTTL      time.Duration // node: 1 h, re-announced at 11/12
	// TelemetryTimeout is how long a renter waits for the first signed
	// telemetry before it gives a lease up.
	TelemetryTimeout time.Duration
	// VerifyShare is the share of fake results a renter's verification
	// (canaries, replicas) catches.
	VerifyShare float64
	Reputation  time.Duration // how often a renter recomputes reputation
	Network     Network
}

// DefaultConfig is the market as node runs it, with the renter's
// patience and retry matched to the baselines'.
func DefaultConfig() Config {
	return Config{Seed: 1, Candidates: 5, QuoteDeadline: 3 * time.Second, AwardDeadline: 10 * time.Second,
		Billing: 5 * time.Minute, Pull: 20 * time.Second, Notice: 30 * time.Second, Checkpoint: 10 * time.Minute,
		Patience: 6 * time.Hour, Retry: 5 * time.Minute, LeaseMargin: 2 * time.Minute, Clearing: ClearingSecondScore, StartDeadline: 30 * time.Second, OfferTTL: time.Hour,
		TelemetryTimeout: 2 * time.Minute, VerifyShare: 0.5, Reputation: 6 * time.Hour, Network: DefaultNetwork()}
}

// Validate refuses a configuration the market cannot run as node would:
// each message names the option (its YAML key under market:).
func (c Config) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("market."+f, a...) }
	switch {
	case c.Candidates < 1 || c.Candidates > 100:
		return bad("candidates %d: use 1 to 100", c.Candidates)
	case c.QuoteDeadline <= 0 || c.AwardDeadline <= 0:
		return bad("quotedeadline and awarddeadline must be positive")
	case c.Billing < time.Second || c.Billing > sched.MaxBillingSec*time.Second:
		return bad("billing %v: use 1s to %v (a provider refuses a longer interval)", c.Billing, sched.MaxBillingSec*time.Second)
	case c.Retry <= 0 || c.Patience < c.Retry:
		return bad("retry %v must be positive and at most market.patience (%v)", c.Retry, c.Patience)
	case c.LeaseMargin < c.Pull || c.LeaseMargin > 24*time.Hour:
		return bad("leasemargin %v: at least market.pull (%v), which every lease spends before the work starts, and at most 24h", c.LeaseMargin, c.Pull)
	case c.Clearing != ClearingSecondScore && c.Clearing != ClearingPayAsBid:
		return bad("clearing %q: use %s (node's rule) or %s", c.Clearing, ClearingSecondScore, ClearingPayAsBid)
	case c.OfferTTL < 12*time.Second:
		return bad("offerttl %v: at least 12s (an offer is re-announced at 11/12 of it)", c.OfferTTL)
	case c.Pull < 0 || c.Notice < 0 || c.StartDeadline <= 0 || c.TelemetryTimeout <= 0:
		return bad("pull and notice may not be negative; startdeadline and telemetrytimeout must be positive")
	case c.Checkpoint <= 0 || c.Reputation <= 0:
		return bad("checkpoint and reputation must be positive")
	case c.VerifyShare < 0 || c.VerifyShare > 1:
		return bad("verifyshare %v: use 0 to 1", c.VerifyShare)
	case c.Network.Latency < 0 || c.Network.Jitter < 0 || c.Network.GossipDelay < 0 || c.Network.CrossFactor < 1 || c.Network.GossipDegree < 1:
		return bad("network: latency, jitter and gossipdelay may not be negative; crossfactor and gossipdegree are at least 1")
	case c.Network.Loss < 0 || c.Network.Loss >= 1:
		return bad("network.loss %v: use 0 up to (not including) 1", c.Network.Loss)
	}
	return nil
}

// Progress is what a running simulation reports about every simulated
// hour.
type Progress struct {
	Now      time.Duration // virtual time since Epoch
	Stop     time.Duration
	Finished int // jobs whose outcome is known
	Jobs     int
}

// The clearing rules a run can use (Config.Clearing).
const (
	ClearingSecondScore = "second-score"
	ClearingPayAsBid    = "pay-as-bid"
)

// MarketStats are the market run's own counters, beside its Strategy.
type MarketStats struct {
	Rounds int64 `json:"rounds"`
	// QuotesBusy counts quotes declined as fully utilised
	// (auction.ReasonBusy): providers the renter's book showed with free
	// GPUs that had none, a measure of how far offers lag the providers.
	QuotesBusy       int64 `json:"quotes_declined_busy"`
	StartFailed      int64 `json:"start_failed"`
	UnpaidStops      int64 `json:"unpaid_stops"`
	ReputationPasses int64 `json:"reputation_passes"`
	Ratings          int64 `json:"ratings"`
	// BusiestNodeGossip is the gossip a renter subscribed to every shard
	// receives, bytes per second.
	BusiestNodeGossip float64 `json:"busiest_node_gossip_bytes_per_s"`
	// WinningBids and SecondScores sum, over every lease, the winner's
	// bid and what the second-score rule pays it (micro-credits per
	// GPU-hour): their gap is what winners could have asked more and
	// still won, the gain pay-as-bid offers for shading bids up.
	Clearing     string `json:"clearing"` // market.clearing
	WinningBids  int64  `json:"winning_bids"`
	SecondScores int64  `json:"second_scores"`
	finished     int
}

type market struct {
	cfg        Config
	net        Network
	supply     *Supply
	demand     *Demand
	w          *world
	stop       time.Duration
	ctx        context.Context
	providers  []*simProvider
	renters    map[int]*simRenter // only those that submit a job
	byPeer     map[string]*simProvider
	jobs       map[string]*simJob
	gangs      []*simGang  // gang jobs (Job.Members > 1), driven by srenter_gang.go
	arrays     []*simArray // job arrays (Job.Array), driven by srenter_array.go
	outcomes   []Outcome
	book       *book
	traffic    traffic
	ratings    []ledger.Rating
	nRatings   int64
	tracks     map[string]renter.TrackRecord
	stats      MarketStats
	quotesBusy atomic.Int64 // MarketStats.QuotesBusy: quotes run on goroutines of their own
	continents []string
	countries  []string
	specs      specMemo
	err        error
}

// fail records the first internal error; the run reports it.
func (m *market) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

// keyFor is a node's key, drawn from the seed so that peer IDs (and so
// every tie broken by them) repeat.
func (m *market) keyFor(kind string, idx int) (crypto.PrivKey, string, error) {
	key, _, err := crypto.GenerateEd25519Key(rand.NewChaCha8(seed32(m.cfg.Seed, kind, fmt.Sprint(idx))))
	if err != nil {
		return nil, "", err
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, "", err
	}
	return key, id.String(), nil
}

func seed32(seed uint64, parts ...string) [32]byte {
	var s [32]byte
	for i := range 4 {
		binary.LittleEndian.PutUint64(s[8*i:], hash64(seed+uint64(i), parts...))
	}
	return s
}

// baseRTT is the round trip between two continents, without jitter.
func (m *market) baseRTT(a, b string) time.Duration {
	one := m.net.Latency
	if a != b {
		one *= time.Duration(m.net.CrossFactor)
	}
	return 2 * one
}

// rtt is one exchange's round trip, its jitter drawn from what it is.
func (m *market) rtt(a, b, job, provider string, salt []byte) time.Duration {
	j := time.Duration(unit(hash64(m.cfg.Seed, "rtt", job, provider, string(salt))) * float64(m.net.Jitter))
	return m.baseRTT(a, b) + 2*j
}

// lost draws whether an exchange's message is dropped.
func (m *market) lost(job, provider string, salt []byte) bool {
	return m.net.Loss > 0 && unit(hash64(m.cfg.Seed, "loss", job, provider, string(salt))) < m.net.Loss
}

// feedAppend is one entry in a node's feed (a lease, a settlement, a
// rating): its new head is gossiped to every node on the ledger topic.
func (m *market) feedAppend() {
	m.traffic.mu.Lock()
	m.traffic.heads += headBytes
	m.traffic.mu.Unlock()
}

// countriesBut lists every supply country except c (a job that must run
// in c denies the others: placement names continents only).
func (m *market) countriesBut(c string) []string {
	return slices.DeleteFunc(slices.Clone(m.countries), func(x string) bool { return x == c })
}

func isContinent(r string) bool { return len(r) == 2 && strings.ToLower(r) == r }
