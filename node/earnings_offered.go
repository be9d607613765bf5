package node

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/earnings"
	"github.com/gleaner-net/gleaner/node/store"
)

// Offered GPU-time: the denominator of the provider's fill rate. Neither
// the ledger nor the offer records how long GPUs were on sale, so the node
// samples it and keeps one running total per UTC day in node.db (the
// offer bucket, keys "offered/YYYY-MM-DD"). A sample counts the GPUs the
// current offer lists while it is offered and inside its windows, for the
// second since the previous sample: a crash loses at most the unwritten
// 15 s, which makes the fill rate read high by that much, never by a
// made-up figure.
// The figure counts from the first sample (From of the oldest day).

const (
	offeredFlush  = 15 * time.Second
	offeredPrefix = "offered/"
)

// offeredGPUs is how many GPUs are on sale at now: those the current
// offer lists, while it is offered and one of its windows holds.
func (n *Node) offeredGPUs(now time.Time) int {
	st := n.provider.Status()
	if st.Current == nil || auction.AvailableFor(st.Current.Windows, now) <= 0 {
		return 0
	}
	return len(st.Current.GPUs)
}

// addOffered adds spans to the stored days, in one transaction.
func (n *Node) addOffered(spans []earnings.DaySpan) error {
	if len(spans) == 0 {
		return nil
	}
	return n.store.Update(func(tx *store.Tx) error {
		for _, s := range spans {
			var d earnings.OfferedDay
			if err := tx.Get(store.BucketOffer, offeredPrefix+s.Day, &d); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if d.From == 0 {
				d.From = s.From
			}
			d.GPUSeconds += s.GPUSeconds
			if err := tx.Put(store.BucketOffer, offeredPrefix+s.Day, d); err != nil {
				return err
			}
		}
		return nil
	})
}

// offeredDays reads every stored day.
func (n *Node) offeredDays() (map[string]earnings.OfferedDay, error) {
	out := map[string]earnings.OfferedDay{}
	err := n.store.ForEach(store.BucketOffer, func(key string, raw []byte) error {
		day, ok := strings.CutPrefix(key, offeredPrefix)
		if !ok {
			return nil
		}
		var d earnings.OfferedDay
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil // one unreadable day is left out, not the report
		}
		out[day] = d
		return nil
	})
	return out, err
}

// recordOffered samples the offered GPUs every second and adds each
// second to the day it fell on, counting the GPUs seen at its start; it
// writes the sums every offeredFlush and once more when ctx ends (the
// node stopping: the offer is withdrawn by then, and the last second
// still counts what was on sale during it). A gap longer than two samples
// (the machine slept, the clock jumped) counts only one second: nobody
// saw what was offered meanwhile.
func (n *Node) recordOffered(ctx context.Context) {
	sampleT, flushT := time.NewTicker(time.Second), time.NewTicker(offeredFlush)
	defer sampleT.Stop()
	defer flushT.Stop()
	last := time.Now().Truncate(time.Second)
	gpus := n.offeredGPUs(last)
	var pending []earnings.DaySpan
	sample := func() {
		now := time.Now().Truncate(time.Second)
		from := last
		if now.Sub(from) > 2*time.Second {
			from = now.Add(-time.Second)
		}
		pending = append(pending, earnings.Accrue(from, now, gpus)...)
		last, gpus = now, n.offeredGPUs(now)
	}
	flush := func() {
		pending = earnings.Merge(pending) // a day's worth of failed flushes stays one span
		if err := n.addOffered(pending); err != nil {
			n.log.Warn("recording offered GPU time", "err", err)
			return // kept: the next flush writes it
		}
		pending = pending[:0]
	}
	for {
		select {
		case <-ctx.Done():
			sample()
			flush()
			return
		case <-sampleT.C:
			sample()
		case <-flushT.C:
			flush()
		}
	}
}
