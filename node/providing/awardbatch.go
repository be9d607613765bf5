package providing

import (
	"sync"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/ledger"
)

// Awards are committed in groups (issue 33's burst). An award's lease
// must be in the lease store and in this node's feed before the renter
// hears of it, and each of those is a durable write; one award at a time,
// a provider that a burst sends 8 awards at once made the last
// of them wait for 16 fsyncs, seconds on a loaded disk, which was most of
// the burst's tail. Now the awards that arrive while one group is being
// written wait together and are claimed one at a time, as before, and
// written in one store transaction and one feed append: one fsync each
// for the whole group. No renter hears of a lease before it is durable,
// and no claim is displaced or superseded before it is written (claim
// flushes first).

// pendingAward is one award waiting for its group's commit.
type pendingAward struct {
	l       *auction.Lease
	sl      *auction.SignedLease
	want    []int
	raw     []byte // the counter-signed lease, once committed
	err     error  // or why it was refused
	victims []sched.Action
	turn    chan bool // true: lead the next group; false: committed (raw or err set)
}

// awardQueue holds the awards waiting for the group being written.
type awardQueue struct {
	mu      sync.Mutex
	pending []*pendingAward
	leading bool // an award is committing a group now
}

// commitAward queues p and returns once its group is committed. The
// first award of an idle provider commits at once, alone; those that
// arrive meanwhile form the next group, which the first of them commits.
func (pj *Provider) commitAward(p *pendingAward) ([]byte, error) {
	q := &pj.awards
	p.turn = make(chan bool, 1)
	q.mu.Lock()
	q.pending = append(q.pending, p)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if !lead && !<-p.turn {
		return p.raw, p.err
	}
	q.mu.Lock()
	group := q.pending
	q.pending = nil
	q.mu.Unlock()
	pj.commitGroup(group)
	q.mu.Lock()
	if len(q.pending) > 0 {
		q.pending[0].turn <- true // it takes the lead (and q.pending)
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	for _, o := range group {
		if o != p {
			o.turn <- false
		}
	}
	return p.raw, p.err
}

// commitGroup claims the group's awards in order, one at a time, and
// writes the claimed ones together.
func (pj *Provider) commitGroup(group []*pendingAward) {
	// Only the queue's leader runs this, one group at a time (commitAward
	// hands the lead on after it returns), so no lock is needed: no
	// displacement may end a lease another award has claimed but not yet
	// recorded and journaled, or one being superseded, and this node's
	// feed closes a lease before it signs the next on its GPUs.
	var claimed []*pendingAward
	flush := func() {
		pj.writeAwards(claimed)
		claimed = nil
	}
	for _, p := range group {
		if pj.claim(p, flush) {
			claimed = append(claimed, p)
		}
	}
	flush()
}

// writeAwards records the claimed awards (one store transaction) and
// journals them (one feed append), in order; a failed write refuses them
// all and frees their GPUs.
func (pj *Provider) writeAwards(claimed []*pendingAward) {
	if len(claimed) == 0 {
		return
	}
	recs := make([]savedLease, len(claimed))
	raws := make([][]byte, len(claimed))
	for i, p := range claimed {
		recs[i], raws[i] = savedLease{p.l.JobID, p.raw}, p.raw
	}
	if err := pj.saveLeases(recs, LeaseAwarded); err != nil {
		for _, p := range claimed {
			pj.forget(p.l.JobID)
			p.raw, p.err = nil, err
		}
		return
	}
	// Journaled before the renter hears of it, and in order with this
	// node's settlements (see settle).
	pj.recordAll(ledger.TypeLease, raws)
	for _, p := range claimed {
		pj.do(p.victims)
	}
	pj.p.Refresh() // the offer advertises the bookings (rate-limited)
}
