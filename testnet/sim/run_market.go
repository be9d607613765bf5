package sim

import (
	"context"

	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction/renter"
)

// wholeBook, set by a test, hands every round the whole offer book
// instead of the providers that could suit the job.
var wholeBook bool

// MarketName is the decentralised market's Strategy.Name.
const MarketName = "market"

// RunMarket runs the decentralised market on s and d for horizon seconds:
// every provider and renter a node of the real market code, in virtual
// time. progress, if not nil, hears about every simulated hour.
func RunMarket(cfg Config, s *Supply, d *Demand, horizon int64, progress func(Progress)) (Strategy, MarketStats, error) {
	if len(s.Providers) == 0 {
		return Strategy{}, MarketStats{}, errors.New("no providers")
	}
	if err := cfg.Validate(); err != nil {
		return Strategy{}, MarketStats{}, err
	}
	if err := d.checkGangs(); err != nil {
		return Strategy{}, MarketStats{}, err
	}
	stop := time.Duration(horizon) * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &market{cfg: cfg, net: cfg.Network, supply: s, demand: d, w: newWorld(stop), stop: stop, ctx: ctx,
		byPeer: map[string]*simProvider{}, tracks: map[string]renter.TrackRecord{}, jobs: map[string]*simJob{}, outcomes: make([]Outcome, len(d.Jobs)),
		traffic: traffic{gossip: map[string]int64{}}}
	m.book = newBook(s, m.w.secs)
	m.book.whole = wholeBook
	conts, countries := map[string]bool{}, map[string]bool{}
	for _, p := range s.Providers {
		conts[p.Continent], countries[p.Country] = true, true
	}
	m.continents = keysOf(conts)
	m.countries = keysOf(countries)
	for i := range s.Providers {
		p, err := newSimProvider(m, i)
		if err != nil {
			return Strategy{}, MarketStats{}, err
		}
		m.providers = append(m.providers, p)
		m.byPeer[p.id] = p
		m.book.index[p.id] = i
		// Providers come up over the first minute, as a testnet does.
		m.w.after(time.Duration(hash64(cfg.Seed, "up", p.id)%60)*time.Second, p.reannounce)
	}
	// A renter node exists for every renter that submits a job.
	m.renters = map[int]*simRenter{}
	arrays := map[string]*simArray{}
	for i := range d.Jobs {
		j := &d.Jobs[i]
		if m.renters[j.Renter] == nil {
			r, err := newSimRenter(m, j.Renter)
			if err != nil {
				return Strategy{}, MarketStats{}, err
			}
			m.renters[j.Renter] = r
		}
		m.outcomes[i].Job = i
		if j.Gang() {
			sg := &simGang{idx: i, j: j, id: fmt.Sprintf("%s#%d", j.ID, i), renter: m.renters[j.Renter], members: map[string]*simJob{}}
			m.gangs = append(m.gangs, sg)
			if j.Submit < horizon {
				m.w.at(max(time.Duration(j.Submit)*time.Second, time.Minute), func() { sg.renter.submitGang(sg) })
			}
			continue
		}
		if j.Array != "" {
			sa := arrays[j.Array]
			if sa == nil {
				sa = &simArray{id: j.Array, renter: m.renters[j.Renter]}
				arrays[j.Array] = sa
				m.arrays = append(m.arrays, sa)
				if j.Submit < horizon {
					m.w.at(arrayShardStart(j), func() { sa.renter.submitArray(sa) })
				}
			}
			sa.shards = append(sa.shards, &simJob{idx: i, j: j, renter: sa.renter, shard: &arrayShard{arr: sa}})
			continue
		}
		sj := &simJob{idx: i, j: j, id: fmt.Sprintf("%s#%d", j.ID, i), renter: m.renters[j.Renter]}
		m.jobs[sj.id] = sj
		m.outcomes[i].Job = i
		if j.Submit >= horizon {
			continue
		}
		// Offers need a minute to arrive: nothing is submitted before.
		m.w.at(max(time.Duration(j.Submit)*time.Second, time.Minute), func() { sj.renter.place(sj) })
	}
	m.w.run(func(now time.Duration) {
		if progress != nil {
			progress(Progress{Now: now, Stop: stop, Finished: m.stats.finished, Jobs: len(d.Jobs)})
		}
	})
	m.atHorizon(cancel)
	if m.err != nil {
		return Strategy{}, MarketStats{}, m.err
	}
	m.stats.Ratings = m.nRatings
	m.stats.QuotesBusy = m.quotesBusy.Load()
	m.stats.BusiestNodeGossip = m.busiestNode(horizon)
	m.stats.Clearing = cfg.Clearing
	st := Strategy{Name: MarketName, Outcomes: m.outcomes, Messages: m.trafficTotals()}
	return st, m.stats, nil
}

// atHorizon ends the run: leases still running stop where they are (their
// GPU-hours so far count), coroutines waiting on the clock are woken with
// a cancelled context so none is left behind, and every job still open
// is marked as cut off by the horizon.
func (m *market) atHorizon(cancel context.CancelFunc) {
	for _, p := range m.providers {
		ids := make([]string, 0, len(p.leases))
		for id := range p.leases {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			p.end(id, endHorizon)
		}
	}
	cancel()
	m.w.drain()
	for _, j := range m.jobs {
		if !j.settled {
			j.renter.finish(j, "horizon")
		}
	}
	for _, g := range m.gangs {
		g.renter.finishGang(g, "horizon")
	}
	for _, sa := range m.arrays {
		for _, sj := range sa.shards {
			sa.renter.settleShard(sj, "horizon")
		}
	}
}

// trafficTotals is what the run sent. GossipBytes counts what every node
// received: each published message reaches each subscriber of its topic
// GossipDegree times (gossipsub's mesh, duplicates included). Providers
// subscribe to their own continent's offer shard, renters to every shard
// (a renter that buys anywhere must), every node to the ledger's heads.
func (m *market) trafficTotals() Traffic {
	t := &m.traffic
	var all, recv int64
	for _, c := range keysOf(t.gossip) {
		all += t.gossip[c]
	}
	for _, p := range m.providers {
		recv += t.gossip[p.sp.Continent]
	}
	recv += int64(len(m.renters)) * all
	recv += int64(len(m.providers)+len(m.renters)) * t.heads
	return Traffic{Messages: t.messages, Bytes: t.bytes, GossipBytes: recv * m.net.GossipDegree}
}

// busiestNode is the gossip the busiest node receives per second: a
// renter, subscribed to every shard and the ledger topic.
func (m *market) busiestNode(horizon int64) float64 {
	var all int64
	for _, c := range keysOf(m.traffic.gossip) {
		all += m.traffic.gossip[c]
	}
	return float64((all+m.traffic.heads)*m.net.GossipDegree) / float64(horizon)
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
