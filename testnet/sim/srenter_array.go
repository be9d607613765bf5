package sim

import (
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
)

// simArray drives one job array (a demand row with shards, expanded by
// ExpandArrays) as node's renter does (node/renting/array.go):
// renter.Array decides which shards to submit, avoiding whom, when the
// array completes or fails; each shard's job is then an ordinary job of
// the sim's renter (srenter.go: its own auctions, leases, re-auctions
// after a preemption by its Lifecycle), and what became of it is fed
// back to the array as node's shardsSeen does. A shard submitted again
// keeps the progress it checkpointed.
type simArray struct {
	id     string
	renter *simRenter
	a      *renter.Array
	shards []*simJob // by shard index
}

// arrayShard is a shard job's part in its array: how its current job
// ended, as the array is told.
type arrayShard struct {
	arr   *simArray
	ended bool
	why   string // "" when it completed
	last  string // its current or last provider
	avoid []string
}

// submitArray has the renter submit sa as a new renter.Array.
func (r *simRenter) submitArray(sa *simArray) {
	j := sa.shards[0].j
	sa.a = renter.NewArray(sa.id, len(sa.shards), j.Parallel(len(sa.shards)))
	r.arrayStep(sa)
}

// arrayStep tells the array what its in-flight shards' jobs did and
// carries out what it decides.
func (r *simRenter) arrayStep(sa *simArray) {
	m := r.m
	seen := map[int]renter.ShardSeen{}
	for i, sh := range sa.a.Snapshot().Shards {
		if sh.Phase != renter.ShardInFlight {
			continue
		}
		sj := sa.shards[i]
		o := renter.ShardSeen{Provider: sj.shard.last, Ended: sj.shard.ended, Completed: sj.shard.ended && sj.shard.why == ""}
		if o.Ended && !o.Completed {
			o.NoMatch = strings.HasPrefix(sj.shard.why, "no capacity")
			o.Reason = strings.ReplaceAll(sj.shard.why, sj.id, "<job>") // as node's shardReason
		}
		seen[i] = o
	}
	acts := sa.a.Step(seen, r.arrayProviders(sa))
	for _, act := range acts {
		sj := sa.shards[act.Shard]
		switch act.Kind {
		case renter.ActSubmit:
			sj.id, sj.life, sj.holder, sj.attempts = act.Job, nil, "", 0
			sj.shard.ended, sj.shard.why, sj.shard.last, sj.shard.avoid = false, "", "", act.Avoid
			m.jobs[sj.id] = sj
			r.place(sj)
		case renter.ActCancel:
			sj.settled = true // its lease's end is not the array's any more
			if p := m.byPeer[sj.holder]; p != nil {
				id := sj.id
				m.w.after(m.rtt(r.continent, p.sp.Continent, id, p.id, nil)/2, func() { p.end(id, endStopped) })
			}
		}
	}
	state, why := sa.a.State()
	if state == renter.ArrayFailed {
		for _, sj := range sa.shards {
			r.settleShard(sj, "array failed: "+why)
		}
	}
}

// offersFor is the offers j's rounds see: a shard's, the renter's own
// view of the book (node's renter auctions an array's shards over it);
// any other job's, the book.
func (r *simRenter) offersFor(j *simJob, spec *auction.JobSpec) renter.Offers {
	if j.shard == nil {
		return r.m.book.view(spec)
	}
	return r.ownView(spec)
}

// ownView is the renter's own view of the book view spec's rounds use:
// one per view, as node's one over its whole book, kept across rounds so
// that the leases and ends it was told of correct every later round.
func (r *simRenter) ownView(spec *auction.JobSpec) *renter.OwnView {
	key := strings.Join(spec.Resources.Models, "|") + "/" + strings.Join(spec.Placement.Regions, "|") + "/" + string(spec.Tier)
	if r.own == nil {
		r.own = map[string]*renter.OwnView{}
	}
	v := r.own[key]
	if v == nil {
		v = renter.NewOwnView(r.m.book.view(spec), r.m.w.Now)
		r.own[key] = v
	}
	return v
}

// arrayProviders is how many providers in the book could run a shard
// now, as node's providersFor counts them, for spreading the shards.
func (r *simRenter) arrayProviders(sa *simArray) int {
	_, spec, err := r.spec(sa.shards[0])
	if err != nil {
		return 0
	}
	book := r.m.book.view(spec).Snapshot()
	ok, _ := auction.Feasible(spec, book, auction.Env{Now: r.m.w.Now(), RTT: r.trust.RTT, Reputation: r.trust})
	return len(ok)
}

// shardEnded is the end of a shard's current job (r.finish): the shard
// completed, or its job gave up and the array decides what follows.
func (r *simRenter) shardEnded(sj *simJob, why string) {
	if sj.settled || sj.shard.ended {
		return
	}
	sj.shard.ended, sj.shard.why = true, why
	if strings.HasPrefix(why, "accepted a fake") {
		sj.shard.why = "" // the renter took it for a completion, as node's would
	}
	if sj.shard.why == "" || why == "horizon" || r.m.ctx.Err() != nil {
		r.settleShard(sj, why)
	}
	if r.m.ctx.Err() == nil {
		r.arrayStep(sj.shard.arr)
	}
}

// settleShard records a shard's outcome once: completed (why ""), or
// not, and why.
func (r *simRenter) settleShard(sj *simJob, why string) {
	o := sj.out()
	if o.Completed || o.Reason != "" {
		return
	}
	sj.settled = true
	r.settle(o, why)
}

// leased counts sa's shards holding a lease now (tests).
func (sa *simArray) leased() int {
	n := 0
	for _, sj := range sa.shards {
		if sj.holder != "" {
			n++
		}
	}
	return n
}

// arrayShardStart is when a shard may first be submitted: its row's
// submission, and not before offers arrive (a minute).
func arrayShardStart(j *Job) time.Duration {
	return max(time.Duration(j.Submit)*time.Second, time.Minute)
}
