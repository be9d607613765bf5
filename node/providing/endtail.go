package providing

import (
	"slices"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/wire"
)

// A renter that lost its stream while the job ran, and comes back only
// after the run ended and its lease was released (its container gone),
// is answered from what the provider kept of the run (serveJob): how it
// ended, from the lease's record, and before that the last endTailBytes
// of its output, with the offset they begin at in the run's output. The
// renter keeps only what it has not had (node/renting/logs.go counts
// offsets per lease and LogRun), so the lines the job wrote while its
// renter was away reach it once, in order. The tails are kept in memory,
// like the output of a running job (the executor's ring): for the last
// maxEndTails runs, each until its lease's last notice has passed (a
// renter follows a lease no longer), so that they cost at most
// maxEndTails*endTailBytes, and nothing on disk. A renter away for longer
// than the job takes to print endTailBytes sees a gap in the offsets, as
// when the executor's ring overruns; one that comes back after this
// provider restarted hears the exit without the tail.
const (
	endTailBytes = 64 << 10
	maxEndTails  = 64
)

// LogTail is the end of a run's output.
type LogTail struct {
	Data   []byte
	Offset int64  // of Data's first byte in the run's output
	Run    string // the copy of the output it counts in (wire.Event.LogRun)
}

// tailOf is the last max bytes logs retains, with the offset they begin
// at, taken while no write moved it (a job still running may write
// meanwhile: tried again a few times).
func tailOf(logs *executor.LogBuffer, max int, run string) LogTail {
	data, end := logs.Bytes(), logs.Written()
	for try := 0; try < 10 && end != logs.Written(); try++ {
		end = logs.Written()
		data = logs.Bytes()
	}
	if len(data) > max {
		// A copy: the rest of the ring's copy is not kept alive by it.
		data = slices.Clone(data[len(data)-max:])
	}
	return LogTail{Data: data, Offset: end - int64(len(data)), Run: run}
}

// writeTail writes t to s as log events of at most wire.MaxLogChunk,
// each with its offset.
func writeTail(s Stream, t LogTail) error {
	for data, at := t.Data, t.Offset; len(data) > 0; {
		n, off := min(len(data), wire.MaxLogChunk), at
		if err := wire.Write(s, wire.Event{Type: wire.EventLog, Log: data[:n], Offset: &off, LogRun: t.Run, Time: time.Now()}); err != nil {
			return err
		}
		data, at = data[n:], at+int64(n)
	}
	return nil
}

// endTails is the output's tail of the runs that ended last, by job ID.
type endTails struct {
	mu    sync.Mutex
	byJob map[string]endTail
	order []string // job IDs, the oldest kept first
}

type endTail struct {
	lease string    // the CID of the lease whose run it is
	until time.Time // past the lease's last notice: no renter attaches after
	tail  LogTail
}

// keep keeps t, the tail of jobID's run on the lease lease (a CID), until
// until, dropping the oldest kept beyond maxEndTails and those whose time
// is over.
func (e *endTails) keep(jobID, lease string, until time.Time, t LogTail, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byJob == nil {
		e.byJob = map[string]endTail{}
	}
	e.order = slices.DeleteFunc(e.order, func(id string) bool { return id == jobID })
	e.byJob[jobID] = endTail{lease: lease, until: until, tail: t}
	e.order = append(e.order, jobID)
	for len(e.order) > 0 && (len(e.order) > maxEndTails || !now.Before(e.byJob[e.order[0]].until)) {
		delete(e.byJob, e.order[0])
		e.order = e.order[1:]
	}
}

// of is the tail kept of jobID's run on the lease lease (a CID); none
// when none is (another lease's, over, dropped, or kept by an earlier
// process).
func (e *endTails) of(jobID, lease string, now time.Time) LogTail {
	e.mu.Lock()
	defer e.mu.Unlock()
	if k, ok := e.byJob[jobID]; ok && k.lease == lease && now.Before(k.until) {
		return k.tail
	}
	return LogTail{}
}
