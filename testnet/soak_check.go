package testnet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
)

// heads is every up node's ledger heads, by node name then author.
func (s *soak) heads(ctx context.Context) map[string]map[string]node.HeadView {
	out := map[string]map[string]node.HeadView{}
	for _, n := range s.nodes {
		if !n.up.Load() {
			continue
		}
		var hs []node.HeadView
		if s.d.Call(ctx, n.DockerNode, &hs, "ledger", "heads") != nil {
			continue
		}
		m := map[string]node.HeadView{}
		for _, h := range hs {
			m[h.Author] = h
		}
		out[n.Name] = m
	}
	return out
}

// converge measures, from a heal at since, how long until every up node
// holds every feed at least as far as any node held it at the heal: what
// the heal had to carry across. Jobs go on meanwhile, so heads keep moving;
// this asks only that the partition's entries arrived everywhere.
func (s *soak) converge(ctx context.Context, since time.Time, limit time.Duration) (time.Duration, bool) {
	want := map[string]uint64{}
	for _, m := range s.heads(ctx) {
		for a, h := range m {
			want[a] = max(want[a], h.Seq)
		}
	}
	for ctx.Err() == nil && time.Since(since) < limit {
		all := true
		for _, m := range s.heads(ctx) {
			for a, seq := range want {
				if m[a].Seq < seq {
					all = false
				}
			}
		}
		if all {
			return time.Since(since), true
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(since), false
}

// wholeAgain ends the faults: every node up, the networks whole, every
// job ended (or the wait's bound reached), every ledger identical.
func (s *soak) wholeAgain(ctx context.Context) error {
	err := parallelErr(len(s.nodes), func(i int) error {
		n := s.nodes[i]
		if n.up.Load() {
			return nil
		}
		if err := s.d.Restart(ctx, n.DockerNode); err != nil {
			return err
		}
		n.up.Store(true)
		s.note(func(r *SoakReport) { r.Restarts++ })
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := s.heal(ctx); err != nil {
		return err
	}
	// Every job ends within its lease (3 minutes at most) and a re-auction.
	deadline := time.Now().Add(5 * time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		for _, r := range s.renters() {
			s.observeRenter(ctx, r)
		}
		if s.openJobs() == 0 {
			break
		}
		time.Sleep(3 * time.Second)
	}
	s.rep.SettleTime = time.Since(s.t0.Add(s.opts.Duration)).Round(time.Second).String()
	return ctx.Err()
}

func (s *soak) openJobs() (n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.jobs {
		if !renting.Terminal(j.state) {
			n++
		}
	}
	return n
}

// check runs the end checks and writes them into the report.
func (s *soak) check(ctx context.Context) {
	s.checkJobs()
	heads := s.checkLedgersAgree(ctx)
	s.checkConvictions(ctx, heads)
	s.checkProviderFeeds(ctx)
}

// checkJobs: every submitted job completed or ended with a recorded
// reason; none is lost (missing from its renter, or never ending).
func (s *soak) checkJobs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.jobs))
	for k := range s.jobs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s.rep.Ended = map[string]int{}
	for _, k := range keys {
		j := s.jobs[k]
		switch {
		case !renting.Terminal(j.state):
			s.rep.Lost++
			s.rep.violate("job %s has not ended: %s", k, j.state)
		case j.state == renting.StateCompleted:
			s.rep.Completed++
		case strings.TrimSpace(j.errText) == "":
			s.rep.Lost++
			s.rep.violate("job %s ended %s with no reason recorded", k, j.state)
		default:
			s.rep.Ended[reasonClass(j.errText)]++
		}
	}
}

// reasonClass shortens a job's error to its first clause, to count alike
// endings together in the report.
func reasonClass(why string) string {
	why, _, _ = strings.Cut(why, ":")
	if len(why) > 60 {
		why = why[:60]
	}
	return why
}

// checkLedgersAgree: with every node up and the networks whole, every
// node comes to hold identical heads (within 90 s of the last job ending).
// It returns the heads it last read, by node name.
func (s *soak) checkLedgersAgree(ctx context.Context) map[string]map[string]node.HeadView {
	began := time.Now()
	var last map[string]map[string]node.HeadView
	for ctx.Err() == nil && time.Since(began) < 90*time.Second {
		last = s.heads(ctx)
		if len(last) == len(s.nodes) && identical(last) {
			s.rep.FinalConvergence = time.Since(began).Round(100 * time.Millisecond).String()
			return last
		}
		time.Sleep(time.Second)
	}
	s.rep.violate("the nodes' ledger heads still differ 90 s after the soak: %s", headsDiff(last))
	return last
}

func identical(hs map[string]map[string]node.HeadView) bool {
	var first map[string]node.HeadView
	for _, m := range hs {
		if first == nil {
			first = m
			continue
		}
		if len(m) != len(first) {
			return false
		}
		for a, h := range first {
			if m[a].CID != h.CID {
				return false
			}
		}
	}
	return true
}

func headsDiff(hs map[string]map[string]node.HeadView) string {
	var b strings.Builder
	for name, m := range hs {
		fmt.Fprintf(&b, "%s holds %d feeds;", name, len(m))
	}
	return b.String()
}

// checkConvictions: no node holds a fraud proof against any soak node, or
// a frozen feed (in heads, each node's as checkLedgersAgree last read
// them): every daemon here is honest, so any conviction is false.
func (s *soak) checkConvictions(ctx context.Context, heads map[string]map[string]node.HeadView) {
	for _, n := range s.nodes {
		hs, ok := heads[n.Name]
		if !ok {
			s.rep.violate("%s did not answer ledger heads", n.Name)
		}
		for _, h := range hs {
			if h.Frozen {
				s.rep.FalseConvictions++
				s.rep.violate("%s holds %s's feed as frozen (equivocated)", n.Name, h.Author)
			}
		}
		for _, accused := range s.nodes {
			_, err := s.d.Gleaner(ctx, n.DockerNode, "ledger", "proof", accused.PeerID)
			switch {
			case err == nil:
				s.rep.FalseConvictions++
				s.rep.violate("%s holds a fraud proof against %s (%s), an honest node", n.Name, accused.Name, accused.PeerID)
			case !strings.Contains(err.Error(), "no fraud proof"):
				s.rep.violate("ledger proof %s on %s: %v", accused.Name, n.Name, err)
			}
		}
	}
}

// checkProviderFeeds reads every provider's feed (as the first renter
// holds it) in order: no GPU given to a lease while another lease on it is
// open (double-booked GPU-seconds), and no settlement charging more than
// the renter's voucher behind it.
func (s *soak) checkProviderFeeds(ctx context.Context) {
	reader := s.renters()[0]
	for _, p := range s.providers() {
		var es []node.EntryView
		if err := s.d.Call(ctx, reader.DockerNode, &es, "ledger", "history", "--author", p.PeerID, "--limit", "1000"); err != nil {
			s.rep.violate("ledger history of %s: %v", p.Name, err)
			continue
		}
		if len(es) == 1000 {
			s.rep.violate("%s's feed has over 1000 entries: only the newest were checked", p.Name)
		}
		slices.SortFunc(es, func(a, b node.EntryView) int { return int(a.Seq) - int(b.Seq) })
		sec, leases, settled, err := auditFeed(es)
		s.rep.DoubleBookedGPUSeconds += sec
		s.rep.Leases += leases
		s.rep.Settlements += settled
		if err != nil {
			s.rep.violate("%s's feed: %v", p.Name, err)
		}
	}
}

// auditFeed walks one provider's entries in feed order. A lease entry
// holds its GPUs from its start until the settlement that cites it: the
// provider settles every lease before its GPUs are free, in feed order.
// A silver or gold lease taking a GPU that another silver or gold lease
// still holds, for overlapping windows, is a double booking; its GPU-seconds
// run from the second lease's start to the first one's settlement. A bronze
// lease is preemptible: the next lease is awarded while it gets its notice,
// and its job launches once the bronze one has stopped and settled.
// Settlements must charge within the voucher behind them.
func auditFeed(es []node.EntryView) (doubleSec int64, leases, settlements int, err error) {
	type held struct {
		cid   string
		start int64
		l     *auction.Lease
	}
	open := map[string][]held{} // GPU hash -> the leases holding it
	gpusOf := map[string][]string{}
	var errs []string
	for _, e := range es {
		switch e.Type {
		case ledger.TypeLease:
			if e.Lease == nil {
				errs = append(errs, fmt.Sprintf("lease entry %d does not decode", e.Seq))
				continue
			}
			leases++
			h := held{e.LeaseCID, max(e.Lease.Start, e.Time.Unix()), e.Lease}
			gpusOf[e.LeaseCID] = e.Lease.GPUUUIDHash
			for _, g := range e.Lease.GPUUUIDHash {
				for _, o := range open[g] {
					if o.l.Tier != auction.Bronze && h.l.Tier != auction.Bronze && o.l.Start < h.l.End && h.l.Start < o.l.End {
						errs = append(errs, fmt.Sprintf("lease %s took GPU %.8s while lease %s held it", h.cid, g, o.cid))
					}
				}
				open[g] = append(open[g], h)
			}
		case ledger.TypeSettlement:
			settlements++
			var st ledger.Settlement
			if jerr := json.Unmarshal(e.Payload, &st); jerr != nil {
				errs = append(errs, fmt.Sprintf("settlement %d: %v", e.Seq, jerr))
				continue
			}
			if st.Paid() > st.Total {
				errs = append(errs, fmt.Sprintf("settlement %d charges %d of a voucher of %d", e.Seq, st.Paid(), st.Total))
			}
			if len(st.Voucher) > 0 {
				v, _, verr := ledger.DecodeSignedVoucher(st.Voucher)
				if verr != nil || v.Total != st.Total || v.Lease != st.Lease {
					errs = append(errs, fmt.Sprintf("settlement %d: its voucher does not back it (%v)", e.Seq, verr))
				}
			} else if st.Total != 0 {
				errs = append(errs, fmt.Sprintf("settlement %d claims %d with no voucher", e.Seq, st.Total))
			}
			at := e.Time.Unix()
			for _, g := range gpusOf[st.Lease] {
				var mine *held
				for i, o := range open[g] {
					if o.cid == st.Lease {
						mine = &open[g][i]
					}
				}
				if mine == nil {
					continue
				}
				rest := open[g][:0:0]
				for _, o := range open[g] {
					if o.cid == st.Lease {
						continue
					}
					if o.l.Tier != auction.Bronze && mine.l.Tier != auction.Bronze && o.l.Start < mine.l.End && mine.l.Start < o.l.End {
						doubleSec += max(0, min(at, o.l.End)-max(o.start, mine.start))
					}
					rest = append(rest, o)
				}
				open[g] = rest
			}
		}
	}
	if len(errs) > 0 {
		err = fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return doubleSec, leases, settlements, err
}
