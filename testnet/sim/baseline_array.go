package sim

// The baselines' job arrays (issue 36): an array's shards are ordinary
// independent jobs to a central scheduler, released as the array's
// max_parallel allows: a shard that arrives while max_parallel of its
// siblings are submitted and not done waits, and the first waiting one
// is submitted when a sibling completes or gives up.

// blArray is one array's shards submitted and not done, and those held.
type blArray struct {
	inFlight int
	held     []int // job indexes, in shard order
}

// holdShard admits job if it is no shard or its array has room, and
// holds it otherwise (true).
func (b *baselineSim) holdShard(job int) bool {
	j := &b.d.Jobs[job]
	if j.Array == "" {
		return false
	}
	if b.arrays == nil {
		b.arrays = map[string]*blArray{}
	}
	a := b.arrays[j.Array]
	if a == nil {
		a = &blArray{}
		b.arrays[j.Array] = a
	}
	if a.inFlight >= max(j.MaxParallel, 1) {
		a.held = append(a.held, job)
		return true
	}
	a.inFlight++
	b.jobs[job].since = b.now
	return false
}

// shardDone frees job's place in its array (it completed or gave up) and
// submits the array's first held shard now.
func (b *baselineSim) shardDone(job int) {
	a := b.arrays[b.d.Jobs[job].Array]
	if a == nil {
		return
	}
	a.inFlight--
	if len(a.held) > 0 {
		next := a.held[0]
		a.held = a.held[1:]
		b.push(blEvent{at: b.now, kind: blArrive, job: next})
	}
}
