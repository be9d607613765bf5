package providing

import (
	"time"

	sched "github.com/gleaner-net/gleaner/auction/provider"
)

// Leases are the scheduler's active leases at now (awarded, reserved or
// running), with the GPUs each holds: what `gleaner offer show` and the
// earnings' in-progress rows read. The scheduler is the one owner of
// that state; this is a snapshot of it.
func (pj *Provider) Leases(now time.Time) []sched.Info { return pj.sched.Leases(now) }
