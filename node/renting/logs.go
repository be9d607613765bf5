package renting

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
	bolt "go.etcd.io/bbolt"
)

// A renter keeps each job's output (the last logKeep bytes, as a
// provider does) in node.db, so that `job logs` after a restart prints
// what was received before it. Appends only mark the log dirty; it is
// written in batches (every logFlushEvery, when logFlushBytes are
// waiting, when a run ends, and for every append once this node is
// stopping), never one fsync per line.
const (
	logKeep       = 256 << 10
	logFlushEvery = time.Second
	logFlushBytes = 64 << 10
)

// jobLog is one job's retained output. Guarded by Jobs.mu.
type jobLog struct {
	data []byte
	// lease and end place the log in the provider's output: end is the
	// offset (wire.Event.Offset) just past the last byte received of that
	// lease's run. A provider attached to again replays its retained
	// tail; what lies before end is dropped, not written twice.
	lease   string
	end     int64
	pending int // bytes appended since the last flush
}

// storedLog is a jobLog as store.BucketJobLogs keeps it.
type storedLog struct {
	Lease string `json:"lease,omitempty"`
	End   int64  `json:"end"`
	Data  []byte `json:"data"`
}

// add appends the part of chunk not already kept, and keeps only the
// last logKeep bytes. off is the chunk's offset in lease's output, nil
// for the provider's own notes (kept as they come). It returns what was
// added.
func (l *jobLog) add(lease string, off *int64, chunk []byte) []byte {
	if off != nil {
		if l.lease != lease { // a new run (re-auctioned, or adopted by a restarted provider): its offsets start again
			l.lease, l.end = lease, 0
		}
		start := *off
		if skip := l.end - start; skip > 0 {
			n := min(skip, int64(len(chunk)))
			chunk, start = chunk[n:], start+n
		}
		// Past end (start > l.end): bytes the provider could not send
		// (its buffer overran); what follows is kept all the same.
		l.end = max(l.end, start+int64(len(chunk)))
	}
	if len(chunk) == 0 {
		return nil
	}
	l.data = append(l.data, chunk...)
	if over := len(l.data) - logKeep; over > 0 {
		// Sliced forward, not copied down: once the array behind runs
		// out, the next append moves the tail to a new one (about
		// 1.25 logKeep), so memory stays bounded and a full log costs a
		// copy per logKeep/4 bytes appended, not per event.
		l.data = l.data[over:]
	}
	l.pending += len(chunk)
	return chunk
}

// loadLogs reads the retained logs of the jobs in r.jobs that have not
// ended (those whose output may go on), and deletes those of jobs no
// longer recorded: a record removed takes its log. An ended job's log
// stays in node.db until asked for (logsOf), so that a renter with a long
// history neither decodes nor holds every log it ever kept at each start.
func (r *Jobs) loadLogs() error {
	var orphans []string
	err := r.store.ForEach(store.BucketJobLogs, func(k string, v []byte) error {
		j, ok := r.jobs[k]
		switch {
		case !ok:
			orphans = append(orphans, k)
		case !Terminal(j.State):
			var s storedLog
			if json.Unmarshal(v, &s) == nil { // unreadable: the log starts afresh rather than the node not at all
				r.logs[k] = &jobLog{data: s.Data, lease: s.Lease, end: s.End}
			}
		}
		return nil
	})
	if err != nil || len(orphans) == 0 {
		return err
	}
	return r.store.UpdateBucket(store.BucketJobLogs, func(b *bolt.Bucket) error {
		for _, k := range orphans {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
}

// flushLogs writes the logs with anything pending (id: that job's only;
// "": all) in one transaction. Flushes are serialised and take their
// copies under it, so an older copy never overwrites a newer one.
func (r *Jobs) flushLogs(id string) {
	r.logFlush.Lock()
	defer r.logFlush.Unlock()
	put := map[string]storedLog{}
	r.mu.Lock()
	for k, l := range r.logs {
		if (id == "" || k == id) && l.pending > 0 {
			put[k] = storedLog{Lease: l.lease, End: l.end, Data: append([]byte(nil), l.data...)}
			l.pending = 0
		}
	}
	r.mu.Unlock()
	if len(put) == 0 {
		return
	}
	err := r.store.Update(func(tx *store.Tx) error {
		for k, s := range put {
			if err := tx.Put(store.BucketJobLogs, k, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, bolt.ErrDatabaseNotOpen) {
		r.log.Warn("job logs not saved", "err", err)
	}
}

// flushLogsLoop writes pending logs every logFlushEvery until this node
// stops, then once more.
func (r *Jobs) flushLogsLoop() {
	t := time.NewTicker(logFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-r.bg.Done():
			r.flushLogs("")
			return
		case <-t.C:
			r.flushLogs("")
		}
	}
}

func (r *Jobs) LogsOf(id string) ([]byte, error) {
	r.mu.Lock()
	_, known := r.jobs[id]
	array := r.arrays[id] != nil
	l := r.logs[id]
	var data []byte
	if l != nil {
		data = append([]byte(nil), l.data...)
	}
	r.mu.Unlock()
	switch {
	case array:
		return nil, fmt.Errorf("%s is a job array: name a shard (`gleaner job logs %s --shard 0`)", id, id)
	case !known:
		return nil, fmt.Errorf("no job %q", id)
	case l != nil:
		return data, nil
	}
	// A job that had ended when this node started: its log was left in
	// node.db (loadLogs).
	var s storedLog
	if err := r.store.Get(store.BucketJobLogs, id, &s); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("job %s's logs: %w", id, err)
	}
	return s.Data, nil
}

// appendLog keeps a log event's output (of lease's run) and publishes
// what it adds to the job's followers.
func (r *Jobs) appendLog(id, lease string, ev wire.Event) {
	r.mu.Lock()
	l := r.logs[id]
	if l == nil {
		l = &jobLog{}
		r.logs[id] = l
	}
	run := lease // offsets count in the lease's run, in the provider's copy of its output
	if ev.LogRun != "" {
		run += "/" + ev.LogRun
	}
	chunk := l.add(run, ev.Offset, ev.Log)
	flush := l.pending >= logFlushBytes || r.bg.Err() != nil
	r.mu.Unlock()
	if flush {
		r.flushLogs(id)
	}
	// Published in pieces of at most maxLogChunk, whatever the provider
	// sent: a follower's queue is counted in events, so an event's size
	// bounds what a queue can hold.
	for len(chunk) > 0 {
		n := min(len(chunk), wire.MaxLogChunk)
		r.publish(JobEvent{JobID: id, Type: "log", Log: string(chunk[:n]), Time: time.Now().UTC()})
		chunk = chunk[n:]
	}
}
