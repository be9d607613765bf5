package renter

import (
	"fmt"
	"slices"
	"sort"
)

// Gang decides a gang's next steps: one batch job run as Size members on
// Size distinct providers, placed as a unit, started together, and
// ended together (the spec's gang:, auction/jobspec_gang.go). Like Array
// it does no I/O and reads no clock: the node carries out its actions,
// feeds it what came of them (GangEvent), and keeps Snapshot durably, so
// that a restarted node resumes the gang where it was
// (node/renting/gang.go).
//
// Placement is all or nothing. Members are awarded one at a time, each
// avoiding the providers the others hold, and an award is a lease the
// provider holds unstarted (it runs nothing until the renter's start, and
// charges nothing for a run that never began). Only once every member
// holds an award is every member started (the barrier). A member whose
// round leased nothing releases the awards the others hold, at no charge,
// and the gang is placed again avoiding the providers that refused or
// failed the award, up to MaxGangPlacements placements.
//
// Once started, the gang lives and dies together: a member lost,
// preempted, or unable to start stops the others (a cancel, which the
// provider carries out with the lease's notice, so they can write their
// checkpoints), and once every member has stopped the gang is placed
// again, each new member resuming from its rank's last checkpoint. A
// member that failed for good (an exit code the spec does not retry)
// fails the gang: its siblings could only wait for it.
type Gang struct {
	s GangSnapshot
}

// Gang bounds. A placement that leases nothing (some member found no
// provider) costs nothing but time, yet a gang that cannot be placed
// MaxGangPlacements times running is unlikely to be placed by trying on.
// A gang stopped by a member's preemption is placed again up to
// MaxPreemptions times (as one job is); one stopped by a member lost or
// failing to start spends one of the spec's retry.max_reauctions.
const MaxGangPlacements = 3

// Gang states.
const (
	GangPlacing   = "placing"   // awarding members; none started
	GangRunning   = "running"   // every member started
	GangStopping  = "stopping"  // stopping every member, to be placed again
	GangCompleted = "completed" // every member completed
	GangFailed    = "failed"
	GangCancelled = "cancelled"
)

// Member phases.
const (
	MemberPending  = "pending"  // to be awarded
	MemberAwarding = "awarding" // its round is under way (GangAward)
	MemberAwarded  = "awarded"  // holds an award, unstarted
	MemberRunning  = "running"  // started (GangStart)
	MemberStopping = "stopping" // told to stop (GangStop); its end not yet seen
	MemberDone     = "done"     // completed
	MemberEnded    = "ended"    // stopped, released or failed: holds nothing
)

// GangSnapshot is a Gang's whole state, kept as JSON in the gang's record.
type GangSnapshot struct {
	ID            string `json:"id"`
	State         string `json:"state"`
	Reason        string `json:"reason,omitempty"`
	Placement     int    `json:"placement"`      // 1-based: the member jobs' generation
	Failed        int    `json:"failed"`         // placements in a row that leased nothing
	Preemptions   int    `json:"preemptions"`    // re-placements after a preemption
	Reauctions    int    `json:"reauctions"`     // re-placements that spent a re-auction
	MaxReauctions int    `json:"max_reauctions"` // the spec's retry.max_reauctions
	// Together: the members of a placement are awarded in parallel
	// rounds, each over its own share of the book (AwardTogether).
	Together bool         `json:"together,omitempty"`
	Avoid    []string     `json:"avoid,omitempty"` // providers every later member avoids
	Members  []GangMember `json:"members"`
}

// GangMember is one rank's place in its gang.
type GangMember struct {
	Phase    string `json:"phase"`
	Job      string `json:"job,omitempty"`      // its current (or last) job
	Provider string `json:"provider,omitempty"` // its award's provider
	// From is the job of this rank whose checkpoint the next member
	// resumes from: the last one that ran.
	From string `json:"from,omitempty"`
	// Tries is how many awards this rank was given in this placement:
	// more than one when an award was taken back before the start. Each
	// is a job of its own: a provider refuses a job ID it has released.
	Tries int `json:"tries,omitempty"`
	// Shared: its round under way is one of a placement's parallel
	// rounds, over its own share of the book (GangAction.Batch).
	Shared bool `json:"shared,omitempty"`
	// Solo: its parallel round leased nothing (or its award was taken
	// back): for the rest of the placement it is awarded alone, over
	// the whole book, once no other round is under way.
	Solo bool `json:"solo,omitempty"`
}

// GangEvent is what came of one of the gang's actions, or a member's end.
type GangEvent struct {
	Kind EventKind
	Rank int
	Job  string // the member's job; an event of an earlier job is ignored
	// Provider: the award's (GangAwarded), the run's (GangEnded).
	Provider string
	// Failed: GangAwardFailed's providers that refused or failed the
	// award (not those that merely declined to quote); they are avoided
	// by the next placement.
	Failed []string
	End    End    // GangEnded's typed end
	Why    string // in words, for the gang's reason
}

// EventKind is a GangEvent's kind.
type EventKind uint8

const (
	GangAwarded     EventKind = iota + 1 // the member's round leased: it holds an unstarted award
	GangAwardFailed                      // the member's round leased nothing
	GangEnded                            // the member's job ended (run, or award taken back before its start)
)

// GangAction kinds.
const (
	GangAward   = "award"   // auction member Rank as job Job, avoiding Avoid, resuming From's checkpoint; do not start it
	GangStart   = "start"   // start member Rank's job: every member holds an award
	GangRelease = "release" // cancel member Rank's unstarted award: nothing ran, nothing is charged
	GangStop    = "stop"    // cancel member Rank's running job, with its lease's notice
	// GangFollow: follow member Rank's running job again, as any job's
	// is after its renter restarted (its stream re-attached), and report
	// its end as a run's (GangEnded).
	GangFollow = "follow"
)

// GangAction is one thing the node must do for the gang.
type GangAction struct {
	Kind  string
	Rank  int
	Job   string
	Avoid []string // GangAward's
	From  string   // GangAward's: the job whose checkpoint it resumes from, "" for none
	// Patient: GangAward's round may wait for the book to catch up
	// (Policy.Patience) rather than fail at once, since no other member
	// holds an award that would lapse unstarted meanwhile: the book may
	// still show GPUs busy that are free (a gang's members just stopped,
	// their providers not yet republished), which the check at submit
	// (GangFits) counts as able to hold a member.
	Patient bool
	// Batch, Share: a GangAward of a placement's parallel rounds
	// (AwardTogether): Batch members are awarded at once, and this one's
	// round may ask only the providers of share Share of the Batch
	// disjoint shares the node deals the book into (GangShares), so that
	// no two rounds can win the same provider. Batch 0: a round alone,
	// over the whole book less Avoid.
	Batch, Share int
}

// NewGang is a gang of size members, none placed; maxReauctions is the
// spec's retry.max_reauctions. Begin returns its first actions.
func NewGang(id string, size, maxReauctions int) *Gang {
	s := GangSnapshot{ID: id, State: GangPlacing, Placement: 1, MaxReauctions: maxReauctions, Members: make([]GangMember, size)}
	for i := range s.Members {
		s.Members[i].Phase = MemberPending
	}
	return &Gang{s: s}
}

// AwardTogether has the gang's placements award their members in
// parallel rounds, each over its own share of the book, rather than one
// after another: a placement takes about one round instead of one per
// member. A round that leases nothing in its share does not fail the
// placement: its member is then awarded alone, over the whole book, once
// the other rounds are over. Call it before Begin.
func (g *Gang) AwardTogether() { g.s.Together = true }

// RestoreGang is the gang a snapshot kept.
func RestoreGang(s GangSnapshot) *Gang {
	s.Members = slices.Clone(s.Members)
	s.Avoid = slices.Clone(s.Avoid)
	return &Gang{s: s}
}

// Snapshot is a copy of the gang's state.
func (g *Gang) Snapshot() GangSnapshot {
	s := g.s
	s.Members = slices.Clone(g.s.Members)
	s.Avoid = slices.Clone(g.s.Avoid)
	return s
}

// State is the gang's state and, when it ended otherwise than completed,
// why.
func (g *Gang) State() (string, string) { return g.s.State, g.s.Reason }

// Ended reports whether the gang has ended for good.
func (g *Gang) Ended() bool {
	switch g.s.State {
	case GangCompleted, GangFailed, GangCancelled:
		return true
	}
	return false
}

// GangMemberJob is the ID of rank's job in placement n (1-based) of
// gang, its try'th award (1-based) there: derived, so that a node that
// stopped after keeping the snapshot and before submitting submits the
// same job again.
func GangMemberJob(gang string, rank, n, try int) string {
	id := fmt.Sprintf("%s-m%d", gang, rank)
	if n > 1 {
		id += fmt.Sprintf("-%d", n)
	}
	if try > 1 {
		id += fmt.Sprintf("-t%d", try)
	}
	return id
}

// Begin is what to do now: the next award while placing, nothing
// otherwise. A node resuming a gang calls it after RestoreGang; a member
// recorded as awarding is awarded again under the same job ID.
func (g *Gang) Begin() []GangAction {
	if g.s.State != GangPlacing {
		return nil
	}
	var again []GangAction
	for i := range g.s.Members {
		if m := &g.s.Members[i]; m.Phase == MemberAwarding {
			// The same job again: its round's answer was lost.
			again = append(again, GangAction{Kind: GangAward, Rank: i, Job: m.Job, Avoid: g.avoidFor(i), From: m.From})
			if !g.s.Together {
				return again
			}
		}
	}
	if len(again) > 0 {
		shareOut(again, g.s.Members)
		return again
	}
	return g.next()
}

// Step takes one event and returns what to do next.
func (g *Gang) Step(ev GangEvent) []GangAction {
	if ev.Rank < 0 || ev.Rank >= len(g.s.Members) {
		return nil
	}
	m := &g.s.Members[ev.Rank]
	if ev.Job != m.Job {
		return nil // an earlier placement's job: already accounted for
	}
	switch ev.Kind {
	case GangAwarded:
		if m.Phase != MemberAwarding {
			return nil
		}
		if g.s.State != GangPlacing {
			// Cancelled while its round ran: the award is let go.
			m.Phase = MemberEnded
			return []GangAction{{Kind: GangRelease, Rank: ev.Rank, Job: m.Job}}
		}
		if g.heldByOther(ev.Rank, ev.Provider) {
			// Two rounds won one provider (shares dealt from books that
			// differed): this award goes, unstarted, and its member is
			// awarded alone.
			m.Phase, m.Solo, m.Shared = MemberPending, true, false
			return append([]GangAction{{Kind: GangRelease, Rank: ev.Rank, Job: m.Job}}, g.next()...)
		}
		m.Phase, m.Provider, m.Shared = MemberAwarded, ev.Provider, false
		return g.next()
	case GangAwardFailed:
		if m.Phase != MemberAwarding {
			return nil
		}
		m.Phase = MemberEnded
		if g.s.State != GangPlacing {
			return nil
		}
		if m.Shared {
			// Its share held nothing it could lease: awarded alone over
			// the whole book once the other rounds are over.
			for _, p := range ev.Failed {
				g.avoid(p)
			}
			m.Phase, m.Solo, m.Shared = MemberPending, true, false
			return g.next()
		}
		return g.placementFailed(ev)
	case GangEnded:
		return g.ended(ev.Rank, ev)
	}
	return nil
}

// next awards the lowest pending rank or, once every member holds an
// award, starts them all. A gang awarding together awards every pending
// member at once, in parallel rounds over disjoint shares of the book,
// unless one of them must be awarded alone; it waits for the rounds under
// way before any round alone, which could win a provider one of them is
// winning.
func (g *Gang) next() []GangAction {
	if g.s.Together {
		if acts, waiting := g.nextTogether(); waiting || len(acts) > 0 {
			return acts
		}
	} else {
		for i := range g.s.Members {
			if g.s.Members[i].Phase == MemberPending {
				g.s.Members[i].Phase = MemberAwarding
				return []GangAction{g.awardAction(i)}
			}
		}
	}
	for _, m := range g.s.Members {
		if m.Phase != MemberAwarded {
			return nil // a member still awarding (only after a restart)
		}
	}
	g.s.State, g.s.Failed = GangRunning, 0
	acts := make([]GangAction, len(g.s.Members))
	for i := range g.s.Members {
		g.s.Members[i].Phase = MemberRunning
		acts[i] = GangAction{Kind: GangStart, Rank: i, Job: g.s.Members[i].Job}
	}
	return acts
}

// nextTogether is next's awards for a gang awarding together; waiting:
// rounds are under way, and nothing more is done until they are over.
func (g *Gang) nextTogether() (acts []GangAction, waiting bool) {
	var pending []int
	solo := false
	for i, m := range g.s.Members {
		switch m.Phase {
		case MemberAwarding:
			return nil, true
		case MemberPending:
			pending = append(pending, i)
			solo = solo || m.Solo
		}
	}
	switch {
	case len(pending) == 0:
		return nil, false
	case len(pending) == 1 || solo:
		pending = pending[:1]
	}
	for _, i := range pending {
		g.s.Members[i].Phase = MemberAwarding
		g.s.Members[i].Shared = len(pending) > 1
		acts = append(acts, g.awardAction(i))
	}
	if len(acts) > 1 {
		shareOut(acts, g.s.Members)
	}
	return acts, false
}

// shareOut numbers the parallel rounds acts: one share of the book each.
func shareOut(acts []GangAction, members []GangMember) {
	for k := range acts {
		if members[acts[k].Rank].Shared {
			acts[k].Batch, acts[k].Share = len(acts), k
		}
	}
}

// heldByOther: a member other than rank holds an award on provider p.
func (g *Gang) heldByOther(rank int, p string) bool {
	for i, o := range g.s.Members {
		if i != rank && o.Phase == MemberAwarded && o.Provider == p {
			return true
		}
	}
	return false
}

// awardAction is rank's award, avoiding the providers the gang avoids and
// those its other members hold: a gang is on distinct providers.
func (g *Gang) awardAction(rank int) GangAction {
	m := &g.s.Members[rank]
	m.Tries++
	m.Job = GangMemberJob(g.s.ID, rank, g.s.Placement, m.Tries)
	patient := true
	for i, o := range g.s.Members {
		patient = patient && (i == rank || o.Phase != MemberAwarded)
	}
	return GangAction{Kind: GangAward, Rank: rank, Job: m.Job, Avoid: g.avoidFor(rank), From: m.From, Patient: patient}
}

// avoidFor is the providers rank's award avoids.
func (g *Gang) avoidFor(rank int) []string {
	avoid := slices.Clone(g.s.Avoid)
	for i, o := range g.s.Members {
		if i != rank && o.Phase == MemberAwarded && o.Provider != "" {
			avoid = append(avoid, o.Provider)
		}
	}
	sort.Strings(avoid)
	return slices.Compact(avoid)
}

// placementFailed: a member's round leased nothing. Every award held is
// released, unstarted, and the gang placed again avoiding the providers
// that failed the award, unless it has failed to be placed too often.
func (g *Gang) placementFailed(ev GangEvent) []GangAction {
	acts := g.releaseAwards()
	for _, p := range ev.Failed {
		g.avoid(p)
	}
	g.s.Failed++
	if g.s.Failed >= MaxGangPlacements {
		g.s.State = GangFailed
		g.s.Reason = fmt.Sprintf("member %d could not be placed %d times running; the last: %s", ev.Rank, g.s.Failed, ev.Why)
		return acts
	}
	g.replace()
	return append(acts, g.next()...)
}

// releaseAwards lets go of every unstarted award.
func (g *Gang) releaseAwards() []GangAction {
	var acts []GangAction
	for i := range g.s.Members {
		m := &g.s.Members[i]
		if m.Phase == MemberAwarded {
			acts = append(acts, GangAction{Kind: GangRelease, Rank: i, Job: m.Job})
			m.Phase = MemberEnded
		}
	}
	return acts
}

// replace starts a new placement: every member pending, under new job IDs.
func (g *Gang) replace() {
	g.s.State = GangPlacing
	g.s.Placement++
	for i := range g.s.Members {
		m := &g.s.Members[i]
		m.Phase, m.Provider, m.Tries, m.Shared, m.Solo = MemberPending, "", 0, false, false
	}
}

func (g *Gang) avoid(p string) {
	if p != "" && !slices.Contains(g.s.Avoid, p) {
		g.s.Avoid = append(g.s.Avoid, p)
	}
}

// ended is member rank's job ending.
func (g *Gang) ended(rank int, ev GangEvent) []GangAction {
	m := &g.s.Members[rank]
	switch m.Phase {
	case MemberAwarded:
		// Its award went before the start: taken back for a better tier,
		// or lapsed. Nothing ran; the member alone is awarded again,
		// away from that provider, while the others hold theirs.
		if g.s.State != GangPlacing {
			m.Phase = MemberEnded
			return nil
		}
		g.avoid(ev.Provider)
		if g.s.Together {
			// Alone, once no other round is under way.
			m.Phase, m.Solo = MemberPending, true
			return g.next()
		}
		m.Phase = MemberAwarding
		return []GangAction{g.awardAction(rank)}
	case MemberRunning, MemberStopping:
	default:
		return nil
	}
	wasStopping := m.Phase == MemberStopping
	if ev.End == EndCompleted {
		m.Phase = MemberDone
	} else {
		m.Phase = MemberEnded
	}
	if ev.End != EndNotStarted {
		m.From = m.Job // it ran: its checkpoint, if any, is the rank's latest
	}
	if g.s.State == GangRunning && !wasStopping {
		if acts, decided := g.memberEnd(rank, ev); decided {
			return acts
		}
	}
	return g.settle()
}

// memberEnd decides what a running member's own end means for the gang;
// decided is false for a completion that leaves others running.
func (g *Gang) memberEnd(rank int, ev GangEvent) ([]GangAction, bool) {
	why := fmt.Sprintf("member %d: %s", rank, ev.Why)
	switch ev.End {
	case EndCompleted:
		return nil, false
	case EndPreempted:
		if g.s.Preemptions >= MaxPreemptions {
			return g.fail(fmt.Sprintf("%s; preempted %d times", why, g.s.Preemptions)), true
		}
		g.s.Preemptions++
	case EndLost, EndNotStarted, EndRetryExit:
		if ev.End == EndLost {
			g.avoid(ev.Provider)
		}
		if g.s.Reauctions >= g.s.MaxReauctions {
			return g.fail(fmt.Sprintf("%s; no re-auctions left (retry.max_reauctions %d)", why, g.s.MaxReauctions)), true
		}
		g.s.Reauctions++
	default: // failed for good, or cancelled by someone else
		return g.fail(why), true
	}
	g.s.State, g.s.Reason = GangStopping, why
	return append(g.stopRunning(), g.settle()...), true
}

// fail ends the gang and stops every member still holding anything.
func (g *Gang) fail(reason string) []GangAction {
	g.s.State, g.s.Reason = GangFailed, reason
	return append(g.releaseAwards(), g.stopRunning()...)
}

// stopRunning tells every running member to stop.
func (g *Gang) stopRunning() []GangAction {
	var acts []GangAction
	for i := range g.s.Members {
		m := &g.s.Members[i]
		if m.Phase == MemberRunning {
			acts = append(acts, GangAction{Kind: GangStop, Rank: i, Job: m.Job})
			m.Phase = MemberStopping
		}
	}
	return acts
}

// settle moves the gang on once no member is running or stopping:
// completed when every member completed, placed again when stopping.
func (g *Gang) settle() []GangAction {
	done := 0
	for _, m := range g.s.Members {
		switch m.Phase {
		case MemberRunning, MemberStopping, MemberAwarding:
			return nil
		case MemberDone:
			done++
		}
	}
	switch {
	case g.s.State == GangRunning && done == len(g.s.Members):
		g.s.State, g.s.Reason = GangCompleted, ""
	case g.s.State == GangStopping:
		g.replace()
		return g.next()
	}
	return nil
}

// Cancel ends the gang at the renter's request: awards are released and
// running members stopped.
func (g *Gang) Cancel() []GangAction {
	if g.Ended() {
		return nil
	}
	g.s.State, g.s.Reason = GangCancelled, "cancelled by the renter"
	return append(g.releaseAwards(), g.stopRunning()...)
}

// Restarted is what to do when the renter's node restarts with the gang
// unfinished. A gang that was running goes on running: every member was
// started (the barrier is behind it), so each running member's job is
// followed again (GangFollow), as any job's is after a restart, and its
// end is the gang's to act on as before. A gang being placed lets its
// awards go (their rounds' goroutines did not survive, so nothing would
// start them) and is placed anew; one that was stopping its members for
// a new placement stops them again. Neither spends anything: the
// restart was the renter's.
func (g *Gang) Restarted() []GangAction {
	var acts []GangAction
	switch g.s.State {
	case GangPlacing:
		for i := range g.s.Members {
			m := &g.s.Members[i]
			if m.Phase == MemberAwarded || m.Phase == MemberAwarding {
				acts = append(acts, GangAction{Kind: GangRelease, Rank: i, Job: m.Job})
				m.Phase = MemberEnded
			}
		}
		g.replace()
		return append(acts, g.next()...)
	case GangRunning:
		for i, m := range g.s.Members {
			if m.Phase == MemberRunning {
				acts = append(acts, GangAction{Kind: GangFollow, Rank: i, Job: m.Job})
			}
		}
		// Members done before the restart stay done; a gang whose
		// last running member ended meanwhile settles now.
		return append(acts, g.settle()...)
	case GangStopping:
		if g.s.Reason == "" {
			g.s.Reason = "the renter's node restarted"
		}
		for i := range g.s.Members {
			m := &g.s.Members[i]
			if m.Phase == MemberRunning || m.Phase == MemberStopping {
				acts = append(acts, GangAction{Kind: GangStop, Rank: i, Job: m.Job})
				m.Phase = MemberStopping
			}
		}
		return append(acts, g.settle()...)
	}
	return nil
}

// GangProgress counts the members by phase.
type GangProgress struct {
	Members, Awarded, Running, Done int
}

// Progress is the gang's members counted by phase.
func (g *Gang) Progress() GangProgress {
	p := GangProgress{Members: len(g.s.Members)}
	for _, m := range g.s.Members {
		switch m.Phase {
		case MemberAwarded:
			p.Awarded++
		case MemberRunning, MemberStopping:
			p.Running++
		case MemberDone:
			p.Done++
		}
	}
	return p
}
