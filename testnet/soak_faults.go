package testnet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// soakFault is one fault of the schedule: at At, Kind hits node Node (an
// index of soak.nodes; -1 for a partition) for For, after which the node
// starts again or the networks heal.
type soakFault struct {
	At   time.Duration `json:"at"`
	Kind string        `json:"kind"` // faultKill, faultStop or faultPartition
	Node int           `json:"node"`
	For  time.Duration `json:"for"`
}

const (
	faultKill      = "kill -9"
	faultStop      = "clean stop"
	faultPartition = "partition"
)

// healMeasure bounds the wait for the ledgers to converge after a heal.
const healMeasure = time.Minute

// soakSchedule draws the faults for a run of length d from seed alone, so
// that a seed names a run: one every 8 to 16 s from 8 s in, each lasting 5
// to 20 s and over before d. Of the kinds (kill -9 of a provider, a clean
// stop of a provider, kill -9 of a renter, a partition) it draws only what
// leaves the market able to work: at most two providers down at once, one
// renter, and one partition at a time, the next only once the last one's
// heal has had healMeasure to converge.
func soakSchedule(seed uint64, d time.Duration, providers, renters []*soakNode) []soakFault {
	rng := rand.New(rand.NewPCG(seed, 1))
	np, nr := len(providers), len(renters)
	downUntil := make([]time.Duration, np+nr)
	var apartUntil time.Duration
	var out []soakFault
	span := func(lo, hi int) time.Duration {
		return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Second
	}
	for at := 8 * time.Second; ; at += span(8, 16) {
		length := span(5, 20)
		if at+length > d-5*time.Second {
			return out
		}
		down := func(from, to int) (n int, free []int) {
			for i := from; i < to; i++ {
				if downUntil[i] > at {
					n++
				} else {
					free = append(free, i)
				}
			}
			return n, free
		}
		pdown, pfree := down(0, np)
		rdown, rfree := down(np, np+nr)
		var kinds []string
		if pdown < 2 && len(pfree) > 0 {
			kinds = append(kinds, faultKill, faultKill, faultStop)
		}
		if rdown < 1 && len(rfree) > 0 {
			kinds = append(kinds, "renter "+faultKill)
		}
		if apartUntil <= at {
			kinds = append(kinds, faultPartition)
		}
		if len(kinds) == 0 {
			continue
		}
		f := soakFault{At: at, Kind: kinds[rng.IntN(len(kinds))], Node: -1, For: length}
		switch f.Kind {
		case faultKill, faultStop:
			f.Node = pfree[rng.IntN(len(pfree))]
		case "renter " + faultKill:
			f.Kind, f.Node = faultKill, rfree[rng.IntN(len(rfree))]
		case faultPartition:
			// The next one waits for this one's heal to be measured.
			apartUntil = at + length + healMeasure
		}
		if f.Node >= 0 {
			downUntil[f.Node] = at + length
		}
		out = append(out, f)
	}
}

// applySchedule injects each fault at its time, until ctx ends; faults
// overlap, so each runs on its own. Whatever is still down or apart when
// ctx ends stays so, for wholeAgain.
func (s *soak) applySchedule(ctx context.Context, schedule []soakFault) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, f := range schedule {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(s.t0.Add(f.At))):
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.apply(ctx, f); err != nil && ctx.Err() == nil {
				s.opts.Logf("soak: %s: %v", f.Kind, err)
				s.note(func(r *SoakReport) {
					r.FaultErrors = append(r.FaultErrors, fmt.Sprintf("%s at %v: %v", f.Kind, f.At, err))
				})
			}
		}()
	}
}

func (s *soak) apply(ctx context.Context, f soakFault) error {
	if f.Kind == faultPartition {
		return s.partition(ctx, f.For)
	}
	n := s.nodes[f.Node]
	n.busy.Lock()
	defer n.busy.Unlock()
	hit := time.Now()
	if !n.renter {
		s.displace(n.PeerID, hit)
	}
	n.up.Store(false)
	var err error
	if f.Kind == faultStop {
		err = s.d.Stop(ctx, n.DockerNode, 60)
		s.note(func(r *SoakReport) { r.CleanStops++ })
	} else {
		err = s.d.Kill(ctx, n.DockerNode)
		s.note(func(r *SoakReport) { r.Kills++ })
	}
	if err != nil {
		return err
	}
	s.opts.Logf("soak: %v %s %s for %v", time.Since(s.t0).Round(time.Second), f.Kind, n.Name, f.For)
	select {
	case <-ctx.Done():
		return nil // wholeAgain starts it
	case <-time.After(time.Until(hit.Add(f.For))):
	}
	if err := s.d.Restart(ctx, n.DockerNode); err != nil {
		return err
	}
	n.up.Store(true)
	s.note(func(r *SoakReport) { r.Restarts++ })
	return nil
}

// partition unplugs every bridge from the network it is not homed on, so
// that A and B go on apart, then plugs them back after apart and measures
// how long the ledger takes to converge.
func (s *soak) partition(ctx context.Context, apart time.Duration) error {
	// The schedule spaces partitions; a heal slower than its measure
	// must still not have the next cut race it.
	if !s.cutting.TryLock() {
		return errors.New("the last partition is still healing: skipped")
	}
	defer s.cutting.Unlock()
	s.note(func(r *SoakReport) { r.Partitions++ })
	s.opts.Logf("soak: %v partition for %v", time.Since(s.t0).Round(time.Second), apart)
	for _, b := range s.bridges {
		if err := s.d.Detach(ctx, b.DockerNode, s.otherNet(b)); err != nil {
			return err
		}
	}
	select {
	case <-ctx.Done():
		return nil // wholeAgain heals it
	case <-time.After(apart):
	}
	healed, err := s.heal(ctx)
	if err != nil {
		return err
	}
	took, ok := s.converge(ctx, healed, healMeasure)
	s.note(func(r *SoakReport) { r.healed(took, ok) })
	return nil
}

func (s *soak) otherNet(n *soakNode) string {
	if n.Net == s.netA {
		return s.netB
	}
	return s.netA
}

// heal plugs the bridges back into their other network and has each that
// is up dial a node of that network, as a cable plugged in does; it
// returns when the heal began.
func (s *soak) heal(ctx context.Context) (time.Time, error) {
	began := time.Now()
	for _, b := range s.bridges {
		other := s.otherNet(b)
		// Already plugged in (a partition cut short) is whole enough.
		if err := s.d.Attach(ctx, b.DockerNode, other); err != nil && !strings.Contains(err.Error(), "already exists") {
			return began, err
		}
		if !b.up.Load() {
			continue // it dials its known peers when it starts
		}
		for _, n := range s.nodes {
			if n.Net == other && n.up.Load() && n != b {
				if err := s.d.Connect(ctx, b.DockerNode, n.DockerNode); err == nil {
					break
				}
			}
		}
	}
	return began, nil
}
