package sim

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// simGang drives one gang job (Job.Members > 1) as node's renter does
// (node/renting/gang.go): renter.Gang decides what to award, start,
// release or stop; this carries it out over the sim's transport in
// virtual time and feeds the gang what came of it. Each member and
// placement is a job of its own (renter.GangMemberJob) that the
// providers see as any other: one round for its award, held unstarted
// until every member holds one, then the run.
//
// Progress is the gang's, not a member's: a gang steps together, so a
// placement keeps what every member of it kept (the least checkpointed
// progress over its members, none if a member never ran), and what a
// member ran beyond that is lost. A gang the real code gives up on
// (renter.MaxGangPlacements placements in a row that leased nothing, or
// too many preemptions) is submitted again after market.retry from the
// progress it kept, while its patience lasts (until the horizon once it
// ran), as the sim's renters re-auction a job they still want.
type simGang struct {
	idx    int
	j      *Job
	id     string
	renter *simRenter
	g      *renter.Gang
	tries  int           // renter.Gangs submitted so far
	done   time.Duration // progress kept, per GPU, by every member
	ran    bool          // some placement started
	// members is every member job of every placement, by job ID;
	// stints is the current placement's runs that ended, accounted for
	// once none of its members holds anything.
	members map[string]*simJob
	stints  []gangStint
	settled bool
}

// gangStint is one member's run, kept until its placement is accounted.
type gangStint struct {
	st     stint
	useful time.Duration // per GPU, as the member alone would have kept it
}

func (g *simGang) out() *Outcome { return &g.renter.m.outcomes[g.idx] }

// submitGang has the renter submit sg as a new renter.Gang.
func (r *simRenter) submitGang(sg *simGang) {
	if sg.settled {
		return
	}
	if sg.tries == 0 {
		// node's check at submit (submitGang): a gang the offer book can
		// never hold is refused before anything is quoted or bought.
		if err := r.gangFits(sg); err != nil {
			r.finishGang(sg, "refused at submit: "+err.Error())
			return
		}
	}
	sg.tries++
	sg.g = renter.NewGang(fmt.Sprintf("%s.g%d", sg.id, sg.tries), sg.j.Members, 1<<30)
	sg.g.AwardTogether() // as node's submitGang
	r.gangActs(sg, sg.g.Begin())
}

// gangFits is renter.GangFits on the whole book as the renter sees it
// now (offers out of their windows included: they may hold a member
// later), for the gang's spec: a member's, with gang.members.
func (r *simRenter) gangFits(sg *simGang) error {
	_, spec, err := r.spec(&simJob{j: sg.j, id: sg.id, renter: r})
	if err != nil {
		return err
	}
	g := *spec
	g.Gang = &auction.GangSpec{Members: sg.j.Members}
	book := (&bookView{b: r.m.book, idx: r.m.book.all}).Snapshot()
	return renter.GangFits(&g, book, auction.Env{Now: r.m.w.Now(), RTT: r.trust.RTT, Reputation: r.trust})
}

// gangStep feeds the gang one event and carries out what it decides.
func (r *simRenter) gangStep(sg *simGang, ev renter.GangEvent) {
	if sg.g == nil {
		return
	}
	r.gangActs(sg, sg.g.Step(ev))
}

// gangActs carries out acts as node's gangActs does, then settles what
// the gang's state says.
func (r *simRenter) gangActs(sg *simGang, acts []renter.GangAction) {
	m := r.m
	var shares [][]string
	for _, a := range acts {
		switch a.Kind {
		case renter.GangAward:
			mj := &simJob{idx: sg.idx, j: sg.j, id: a.Job, renter: r, done: sg.done, gang: sg, rank: a.Rank}
			var only map[string]bool
			if a.Batch > 0 {
				// A placement's parallel rounds, each over its own share
				// of the book, as node's gangActs deals them.
				if a.Share == 0 || shares == nil {
					shares = r.gangShares(mj, a)
				}
				if len(shares[a.Share]) == 0 {
					r.gangStep(sg, renter.GangEvent{Kind: renter.GangAwardFailed, Rank: a.Rank, Job: a.Job, Why: "no provider left in its share of the book"})
					continue
				}
				only = make(map[string]bool, len(shares[a.Share]))
				for _, p := range shares[a.Share] {
					only[p] = true
				}
			}
			sg.members[a.Job] = mj
			m.jobs[a.Job] = mj
			r.awardMember(sg, mj, a, only)
		case renter.GangStart:
			mj := sg.members[a.Job]
			if mj == nil || m.byPeer[mj.holder] == nil {
				continue
			}
			p := m.byPeer[mj.holder]
			sg.ran, mj.started = true, true
			// Every start is sent at once; each arrives after half its
			// provider's round trip.
			m.w.after(m.rtt(r.continent, p.sp.Continent, mj.id, p.id, nil)/2, func() {
				if mj.holder != p.id {
					return
				}
				if err := p.start(mj.id); err != nil {
					m.stats.StartFailed++
					mj.holder = ""
					r.gangAccount(sg)
					r.gangStep(sg, renter.GangEvent{Kind: renter.GangEnded, Rank: mj.rank, Job: mj.id, Provider: p.id,
						End: renter.EndNotStarted, Why: err.Error()})
				}
			})
		case renter.GangRelease, renter.GangStop:
			mj := sg.members[a.Job]
			if mj == nil || m.byPeer[mj.holder] == nil {
				continue
			}
			p := m.byPeer[mj.holder]
			// A cancel, which the provider carries out with the lease's
			// notice when the member runs (it writes its checkpoint),
			// at once when it never started.
			wait := m.rtt(r.continent, p.sp.Continent, mj.id, p.id, nil) / 2
			if a.Kind == renter.GangStop {
				wait += m.cfg.Notice
			}
			m.w.after(wait, func() { p.end(mj.id, endGangStop) })
		}
	}
	r.gangSettle(sg)
}

// awardMember is one member's round, as node's runMember: one auction
// (with the immediate re-quotes after lost races, and the book's
// patience when no sibling holds an award), its award held unstarted.
// gangShares is renter.GangShares on the book as the renter sees it now,
// for a's batch; equal floors in an order drawn from the seed.
func (r *simRenter) gangShares(mj *simJob, a renter.GangAction) [][]string {
	_, spec, err := r.spec(mj)
	if err != nil {
		return make([][]string, a.Batch)
	}
	book := (&bookView{b: r.m.book, idx: r.m.book.all}).Snapshot()
	env := auction.Env{Now: r.m.w.Now(), RTT: r.trust.RTT, Reputation: r.trust}
	seed := binary.LittleEndian.AppendUint64(nil, hash64(r.m.cfg.Seed, "gang-shares", mj.id))
	return renter.GangShares(spec, book, env, a.Avoid, a.Batch, auction.TiebreakOf(seed))
}

// only, when set, is the providers its round may ask (its share).
func (r *simRenter) awardMember(sg *simGang, mj *simJob, a renter.GangAction, only map[string]bool) {
	m := r.m
	m.w.spawn(func() {
		specYAML, spec, err := r.spec(mj)
		if err != nil {
			m.fail(err)
			return
		}
		auc, err := r.auctioneer(spec, r.m.book.view(spec))
		if err != nil {
			m.fail(err)
			return
		}
		exclude := map[string]bool{}
		for _, p := range a.Avoid {
			exclude[p] = true
		}
		req := renter.Request{JobID: mj.id, SpecYAML: specYAML, Spec: spec, Exclude: exclude, Only: only, BillingSec: int64(m.cfg.Billing / time.Second)}
		var pol renter.Policy // one round: the gang decides what follows
		if a.Patient {
			pol.Patience, pol.PatienceBackoff, pol.PatienceStep = renter.DefaultPatience, renter.DefaultBackoff, m.cfg.Retry
			if a.Batch > 0 {
				pol.Patience = renter.GangSharePatience // as node's runMember
			}
		}
		mj.attempts++
		// The re-quote jitter drawn from the seed, not the global source,
		// so that a seed gives the same run.
		pol.Rand = rand.New(rand.NewPCG(hash64(m.cfg.Seed, "jitter", mj.id), uint64(mj.attempts)))
		res, err := auc.Place(m.ctx, req, pol)
		m.stats.Rounds += int64(res.Attempt + res.Races + 1)
		if m.ctx.Err() != nil {
			return // the horizon
		}
		if err != nil {
			r.gangStep(sg, renter.GangEvent{Kind: renter.GangAwardFailed, Rank: a.Rank, Job: mj.id, Failed: res.Explain.FailedAwards(), Why: err.Error()})
			return
		}
		m.countClearing(res)
		mj.holder = res.Lease.Provider
		m.feedAppend()
		r.gangStep(sg, renter.GangEvent{Kind: renter.GangAwarded, Rank: a.Rank, Job: mj.id, Provider: res.Lease.Provider})
	})
}
