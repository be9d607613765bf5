package providing

import (
	"fmt"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/wire"
)

// pullReportEvery paces the pull progress a renter is sent: often enough
// to watch, rarely enough that a pull of many layers is not a flood.
const pullReportEvery = time.Second

// pullHooks reports an image pull's progress to the renter as "pulling"
// status events: layers done of those seen, and bytes, which the renter
// shows in `job status` and `job logs -f`. Not for a reservation made
// ready ahead of its window: "pulling" would replace its "reserved".
func pullHooks(send func(wire.Event) error) executor.Hooks {
	var (
		mu     sync.Mutex
		layers = map[string][2]int64{} // current, total
		done   = map[string]bool{}
		last   time.Time
	)
	return executor.Hooks{OnPull: func(p executor.PullProgress) {
		if p.Layer == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		l := layers[p.Layer]
		if p.Total > 0 {
			l = [2]int64{p.Current, p.Total}
		}
		layers[p.Layer] = l
		switch p.Status {
		case "Pull complete", "Already exists", "Download complete":
			done[p.Layer] = true
		}
		if time.Since(last) < pullReportEvery && len(done) < len(layers) {
			return
		}
		last = time.Now()
		var cur, total int64
		for _, l := range layers {
			cur, total = cur+l[0], total+l[1]
		}
		msg := fmt.Sprintf("%s: %d of %d layers", p.Image, len(done), len(layers))
		if total > 0 {
			msg += fmt.Sprintf(", %.1f of %.1f MiB", float64(cur)/(1<<20), float64(total)/(1<<20))
		}
		_ = send(wire.Event{Type: wire.EventStatus, Status: wire.StatusPulling, Error: msg})
	}}
}
