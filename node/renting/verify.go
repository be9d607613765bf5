package renting

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// checkAnswer compares a completed known-answer job (verify.expect_sha256)
// with its answer. The result is journaled as a probe of the provider; a
// wrong answer fails the job.
func (r *Jobs) checkAnswer(id string, spec *auction.JobSpec, leaseCID, provider string, out runEnd) runEnd {
	want := spec.Verify.ExpectSHA256
	if want == "" || out.state != StateCompleted {
		return out
	}
	j, err := r.Get(id)
	if err != nil {
		return out
	}
	// The probe does not publish the answer: the next canary may be the
	// same job.
	p := ledger.Probe{Provider: provider, Lease: leaseCID, Kind: ledger.ProbeCanary, Got: j.Output, Result: ledger.ProbePassed}
	if j.Output != want {
		p.Result = ledger.ProbeFailed
		if j.Output == "" {
			p.Detail = "the provider reported no output hash"
		}
		out = runEnd{state: StateFailed, result: ledger.OutcomeFailed, why: fmt.Sprintf("wrong answer: the output's sha256 is %q, expected %s", j.Output, want)}
	}
	r.recordProbe(p)
	r.update(id, "verify: "+string(p.Result), func(j *JobRecord) { j.Verified = string(p.Result) })
	return out
}

func (r *Jobs) recordProbe(p ledger.Probe) {
	if b, err := json.Marshal(p); err == nil {
		_ = r.journal.Enqueue(ledger.TypeProbe, b)
	}
}

// groupLock serialises the auctions of one job's replicas, so that each
// sees its siblings' providers and picks another.
func (r *Jobs) groupLock(group string) *sync.Mutex {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups == nil {
		r.groups = map[string]*sync.Mutex{}
	}
	m, ok := r.groups[group]
	if !ok {
		m = &sync.Mutex{}
		r.groups[group] = m
	}
	return m
}

// Siblings returns the records of a replica group, in replica order.
func (r *Jobs) Siblings(group string) []JobRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []JobRecord
	for _, j := range r.jobs {
		if j.Group == group {
			out = append(out, *j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// compareReplicas decides a replica group once every replica has ended:
// the output hash that more than half of the replicas produced passes,
// the others fail, and without such a majority every completed replica is
// inconclusive (two replicas that disagree cannot say which one lied).
// Each completed replica becomes a probe of its provider.
func (r *Jobs) compareReplicas(group string) {
	mu := r.groupLock(group)
	mu.Lock()
	defer mu.Unlock()
	sib := r.Siblings(group)
	count := map[string]int{}
	for _, j := range sib {
		if !Terminal(j.State) || j.Verified != "" {
			return // not all done yet, or decided already
		}
		if j.State == StateCompleted && j.Output != "" {
			count[j.Output]++
		}
	}
	majority := ""
	for h, n := range count {
		if 2*n > len(sib) {
			majority = h
		}
	}
	const notCompared ledger.ProbeResult = "not compared" // shown in the job, never journaled
	for _, j := range sib {
		var result ledger.ProbeResult
		note := ""
		switch {
		case j.State != StateCompleted || j.Output == "":
			result, note = notCompared, "the replica did not complete"
		case majority == "":
			result, note = ledger.ProbeInconclusive, fmt.Sprintf("no majority among %d replicas", len(sib))
		case j.Output == majority:
			result = ledger.ProbePassed
		default:
			result, note = ledger.ProbeFailed, "its output differs from the majority's"
		}
		if result != notCompared {
			r.recordProbe(ledger.Probe{Provider: j.Provider, Lease: j.LeaseCID, Kind: ledger.ProbeReplica, Result: result,
				Expected: majority, Got: j.Output, Detail: note})
		}
		r.update(j.ID, strings.TrimSpace("verify: "+string(result)+" "+note), func(rec *JobRecord) { rec.Verified = string(result) })
	}
}

// forProvider is the spec as providers see it: without verify, so that a
// canary's known answer, and whether a job is being checked at all, stay
// with the renter.
func forProvider(spec *auction.JobSpec, specYAML []byte) ([]byte, error) {
	if spec.Verify == (auction.Verify{}) {
		return specYAML, nil
	}
	c := *spec
	c.Verify = auction.Verify{}
	return yaml.Marshal(&c)
}
