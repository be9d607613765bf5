package renter

import (
	"fmt"
	"time"
)

// ArrayETA estimates when an array's shards will all be done, from how
// long its done shards took (each from its job's submission to its end:
// auction, fetch and run, as a renter waits for them) and what is left:
// each shard in flight needs the average less the time it has been in
// flight (at least nothing), each waiting shard the whole average, and
// the work is shared by the shards in flight now (maxParallel when none
// is). ok is false until a shard has finished: nothing to go by.
func ArrayETA(done, inFlight []time.Duration, waiting, maxParallel int) (eta time.Duration, ok bool) {
	if len(done) == 0 {
		return 0, false
	}
	var sum time.Duration
	for _, d := range done {
		sum += max(d, 0)
	}
	avg := sum / time.Duration(len(done))
	work := time.Duration(waiting) * avg
	for _, age := range inFlight {
		work += max(avg-age, 0)
	}
	parallel := len(inFlight)
	if parallel == 0 {
		parallel = maxParallel
	}
	if parallel < 1 {
		parallel = 1
	}
	return work / time.Duration(parallel), true
}

// FormatETA writes an estimate as a person reads it at a glance, rounded
// up to the minute: "<1m", "4m", "1h05m".
func FormatETA(d time.Duration) string {
	if d < time.Minute {
		return "<1m"
	}
	m := int((d + time.Minute - 1) / time.Minute)
	if m < 60 {
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}
