package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/libp2p/go-libp2p/core/crypto"
	"gopkg.in/yaml.v3"
)

// simRenter is one renter node: the real auctioneer (auction/renter)
// over the in-memory transport, its own reputation view of providers,
// and node's follow duties (start, pay per interval, re-auction from the
// last checkpoint) in virtual time.
type simRenter struct {
	m         *market
	idx       int
	key       crypto.PrivKey
	id        string
	continent string
	behaviour Behaviour
	trust     *simTrust
	nonces    io.Reader
	transport *transport
	// own is the book corrected by the renter's own shards' leases and
	// ends (renter.OwnView, as node's), one per book view its shards use.
	own map[string]*renter.OwnView
}

// simJob is one job's life across leases.
type simJob struct {
	idx      int
	j        *Job
	id       string
	renter   *simRenter
	done     time.Duration // progress kept, per GPU
	payGen   int
	settled  bool
	attempts int
	// life is the renter's lifecycle of the job, the code node's renter
	// runs: whom the job leaves, what each end spends, when it gives up.
	life *renter.Lifecycle
	// holder is the provider of the job's current lease; a lease's end
	// counts only from its holder (an award whose start failed may still
	// expire there after the job moved on).
	holder string
	// gang, for a gang's member: its gang, whose driver (srenter_gang.go)
	// acts on the member's award and end; rank is the member's.
	gang    *simGang
	rank    int
	started bool // a member told to start
	// shard, for an array's shard: its array, whose driver
	// (srenter_array.go) decides what follows its job's end.
	shard *arrayShard
}

func (j *simJob) work() time.Duration      { return time.Duration(j.j.Duration) * time.Second }
func (j *simJob) remaining() time.Duration { return j.work() - j.done }
func (j *simJob) out() *Outcome            { return &j.renter.m.outcomes[j.idx] }

func newSimRenter(m *market, idx int) (*simRenter, error) {
	key, id, err := m.keyFor("renter", idx)
	if err != nil {
		return nil, err
	}
	conts := m.continents
	r := &simRenter{m: m, idx: idx, key: key, id: id, continent: conts[idx%len(conts)],
		nonces: rand.NewChaCha8(seed32(m.cfg.Seed, "nonces", id))}
	if idx < len(m.demand.Renters) {
		r.behaviour = m.demand.Renters[idx]
	}
	r.trust = newSimTrust(m, r)
	r.transport = &transport{m: m, renter: r, round: map[string]time.Duration{}, nonce: map[string]string{}}
	return r, nil
}

// spec is the job spec for what is left of j, as a renter's node sends it.
func (r *simRenter) spec(j *simJob) ([]byte, *auction.JobSpec, error) {
	rem := max(j.remaining().Truncate(time.Second), time.Minute)
	s := &auction.JobSpec{
		Name: "sim", Image: "registry.sim/job:1", Tier: j.j.Tier, MaxPrice: j.j.MaxPrice,
		Resources: auction.Resources{GPUs: j.j.GPUs, Models: j.j.Models},
		// The lease is the work plus market.leasemargin for the pull and
		// a slow start, as a renter that knows its job would ask: a
		// silver lease must fit the provider's window, so every minute
		// asked beyond the work is a window the job cannot use.
		Duration:       auction.JobDuration{Expected: rem, Max: (rem + r.m.cfg.LeaseMargin).Truncate(time.Second)},
		AllowSimulated: true, Workload: "batch",
	}
	if s.Tier == auction.Gold {
		start := At(j.j.Start)
		if j.attempts > 0 || !start.After(r.m.w.Now()) {
			// A reservation that was lost is run on demand: its window
			// cannot be honoured any more.
			s.Tier, s.MaxPrice = auction.Silver, j.j.MaxPrice
		} else {
			s.Start = start
		}
	}
	if s.Tier == auction.Gold {
		s.Duration.Max = s.Duration.Expected.Truncate(time.Second) + time.Minute
	}
	switch reg := j.j.Region; {
	case reg == "":
	case isContinent(reg):
		s.Placement.Regions = []string{reg}
	default:
		s.Placement.DenyCountries = r.m.countriesBut(reg)
	}
	raw, err := yaml.Marshal(s)
	if err != nil {
		return nil, nil, err
	}
	parsed, err := auction.ParseJobSpec(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: %w", j.id, err)
	}
	return raw, parsed, nil
}

// place auctions what is left of j, as a coroutine: the auctioneer's
// Place with the retry policy of the run (Config.Retry, Config.Patience).
func (r *simRenter) place(j *simJob) {
	r.m.w.spawn(func() {
		specYAML, spec, err := r.spec(j)
		if err != nil {
			r.m.fail(err)
			return
		}
		a, err := r.auctioneer(spec, r.offersFor(j, spec))
		if err != nil {
			r.m.fail(err)
			return
		}
		if j.life == nil {
			// The sim's renters ask for as many re-auctions as their
			// patience allows; each placement waits at most
			// market.patience, as the baselines' jobs do.
			j.life = renter.NewLifecycle(spec, "")
			j.life.SetMaxReauctions(1 << 30)
			if j.shard != nil {
				for _, p := range j.shard.avoid {
					j.life.Avoid(p, "its array spreads or retries the shard away from it") // as node's run does
				}
			}
		}
		j.attempts++
		req := renter.Request{JobID: j.id, SpecYAML: specYAML, Spec: spec, Exclude: j.life.Exclude(), LastResort: j.life.LastResort(),
			BillingSec: int64(r.m.cfg.Billing / time.Second)}
		// The lifecycle's policy (re-auctions spent, the patience of a job
		// sent back, none after a failed pull), with the sim's timing:
		// market.retry between re-auctions, market.patience per placement;
		// a job sent back looks again as node's does, after 1 s, 2 s, ...,
		// the waits capped at market.retry.
		pol := j.life.Policy()
		if pol.MaxReauctions > pol.Attempt {
			pol.MaxReauctions = pol.Attempt + int(r.m.cfg.Patience/r.m.cfg.Retry)
		}
		pol.Backoff, pol.MaxBackoff = r.m.cfg.Retry, r.m.cfg.Retry
		pol.PatienceBackoff, pol.PatienceStep = renter.DefaultBackoff, r.m.cfg.Retry // node's 1 s, 2 s, ... capped at the sim's retry
		pol.Rand = rand.New(rand.NewPCG(hash64(r.m.cfg.Seed, "jitter", j.id), uint64(j.attempts)))
		res, err := a.Place(r.m.ctx, req, pol)
		r.m.stats.Rounds += int64(res.Attempt - pol.Attempt + res.Races + 1)
		if r.m.ctx.Err() != nil {
			r.finish(j, "horizon")
			return
		}
		if err != nil {
			step := j.life.Unplaced(res, err)
			why := step.Why
			if step.Outcome == renter.OutcomeNoMatch {
				why = "no capacity: " + why
			}
			r.finish(j, why)
			return
		}
		j.life.Placed(res)
		r.m.countClearing(res)
		p := r.m.byPeer[res.Lease.Provider]
		if j.settled {
			// Its array failed while it was being placed: the lease is
			// given up at once, as node's cancel of the shard's job.
			r.m.w.after(r.m.rtt(r.continent, p.sp.Continent, j.id, p.id, nil)/2, func() { p.end(j.id, endStopped) })
			return
		}
		j.holder = p.id
		if j.shard != nil {
			j.shard.last = p.id
			r.ownView(spec).Took(res.Lease) // until its provider's offer shows it, as node's
		}
		r.m.feedAppend()
		// The start follows the award by half a round trip.
		r.m.w.after(r.m.rtt(r.continent, p.sp.Continent, j.id, p.id, nil)/2, func() {
			if err := p.start(j.id); err != nil {
				r.m.stats.StartFailed++
				j.holder = ""
				if j.shard != nil {
					r.ownView(spec).Freed(res.Lease)
				}
				r.next(j, renter.RunEnd{End: renter.EndNotStarted, Cause: startCause(err, spec.Tier), Provider: p.id, Why: err.Error()})
			}
		})
	})
}

// auctioneer is the real auctioneer of node's renter, over the sim's
// transport, offers (the book, or the renter's own view of it) and
// virtual clock.
func (r *simRenter) auctioneer(spec *auction.JobSpec, offers renter.Offers) (*renter.Auctioneer, error) {
	return renter.New(renter.Identity{Peer: r.id, Network: simNetwork, Key: r.key}, r.transport, offers,
		renter.WithClock(r.m.w), renter.WithSpecParser(r.m.specs.parse, r.m.specs.hash), renter.WithTrust(r.trust), renter.WithNonces(r.nonces),
		renter.WithCandidates(r.m.cfg.Candidates), renter.WithDeadlines(r.m.cfg.QuoteDeadline, r.m.cfg.AwardDeadline),
		renter.WithoutDiagnosis(), r.m.clearingOption())
}

// running is the provider's word that the job's container runs: the
// renter pays the first interval at once and every interval after.
func (r *simRenter) running(j *simJob, p *simProvider, l *auction.Lease) {
	j.payGen++
	gen := j.payGen
	per := sched.IntervalPrice(l)
	var total auction.Credits
	var pay func()
	pay = func() {
		if j.payGen != gen {
			return
		}
		total += per
		r.m.traffic.add(voucherBytes)
		oneWay := r.m.rtt(r.continent, p.sp.Continent, j.id, p.id, nil) / 2
		t := total
		r.m.w.after(oneWay, func() { p.paid(j.id, t) })
		if r.behaviour == NonPayer {
			return // one interval, then nothing
		}
		r.m.w.after(time.Duration(l.BillingSec)*time.Second, pay)
	}
	pay()
	if p.sp.Behaviour == Skip {
		// No telemetry comes: the renter gives the lease up once its
		// telemetry deadline passes.
		r.m.w.after(r.m.cfg.TelemetryTimeout, func() {
			if j.payGen == gen {
				p.end(j.id, endStopped)
			}
		})
	}
}

// clearingOption is the auctioneer's payment rule for market.clearing.
func (m *market) clearingOption() renter.Option {
	if m.cfg.Clearing == ClearingPayAsBid {
		return renter.WithPayAsBid()
	}
	return func(*renter.Auctioneer) {}
}

// countClearing adds a lease's winning bid and its second-score price to
// the run's stats.
func (m *market) countClearing(res renter.Result) {
	ex := res.Explain
	if ex == nil || res.Lease == nil {
		return
	}
	for _, rk := range ex.Ranked {
		if rk.Bid.Provider == res.Lease.Provider {
			m.stats.WinningBids += int64(rk.Bid.Price)
			m.stats.SecondScores += int64(ex.SecondScore)
			return
		}
	}
}
