package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
)

// ConvertOptions bound a trace conversion.
type ConvertOptions struct {
	// MaxJobs keeps a uniform random subset of this many jobs (in
	// submit order); 0 keeps all.
	MaxJobs int
	Seed    uint64 // draws that subset
	// MaxDuration caps each job's duration, in seconds; 0 keeps them as
	// the trace has them (pods that ran for months included, which no
	// lease can hold: CheckDemand refuses them).
	MaxDuration int64
}

// qos2023 maps the 2023 pod list's Kubernetes QoS classes. Guaranteed pods
// had their resources reserved, so they become gold reservations; LS
// (latency-sensitive) and Burstable run on demand, silver; BE (best
// effort) is preemptible, bronze. The kind follows the same split: LS
// pods are inference, Guaranteed serving, Burstable batch, BE training.
var qos2023 = map[string]struct {
	tier auction.Tier
	kind string
}{
	"Guaranteed": {auction.Gold, KindServing},
	"LS":         {auction.Silver, KindInference},
	"Burstable":  {auction.Silver, KindBatch},
	"BE":         {auction.Bronze, KindTraining},
}

// ConvertAlibaba2023 reads alibaba_v2023_openb_pod_list_default.csv.
// Pods asking for no GPU (num_gpu 0: CPU-only) are skipped; GPU-sharing
// pods (num_gpu 1 with gpu_milli < 1000) are rounded up to one whole GPU,
// since the market leases whole GPUs; pods never scheduled or with no
// positive deletion_time - scheduled_time are skipped. Pods still running
// at the trace's end have durations cut there, as the trace does.
// gpu_spec codes map through the supply's model table.
func ConvertAlibaba2023(path string, opt ConvertOptions) (*Demand, error) {
	rows, err := readTraceCSV(path, "name", "num_gpu", "gpu_milli", "gpu_spec", "qos",
		"creation_time", "deletion_time", "scheduled_time")
	if err != nil {
		return nil, err
	}
	var jobs []Job
	var cpuOnly, unscheduled, nonPositive, shared, tooMany int
	for _, r := range rows.rows {
		bad := func(col string) error {
			return fmt.Errorf("%s:%d: %s %q is not what the trace's README describes", path, r.line, col, r.get(col))
		}
		gpus, err := strconv.Atoi(r.get("num_gpu"))
		if err != nil || gpus < 0 {
			return nil, bad("num_gpu")
		}
		milli, err := strconv.Atoi(r.get("gpu_milli"))
		if err != nil || milli < 0 {
			return nil, bad("gpu_milli")
		}
		q, ok := qos2023[r.get("qos")]
		if !ok {
			return nil, bad("qos")
		}
		switch {
		case gpus == 0:
			cpuOnly++
			continue
		case gpus > 8:
			tooMany++
			continue
		}
		if r.get("scheduled_time") == "" {
			unscheduled++
			continue
		}
		created, err1 := traceSeconds(r.get("creation_time"))
		sched, err2 := traceSeconds(r.get("scheduled_time"))
		deleted, err3 := traceSeconds(r.get("deletion_time"))
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("%s:%d: a time is not a number of seconds", path, r.line)
		}
		if deleted-sched <= 0 {
			nonPositive++
			continue
		}
		models, err := mapModels(r.get("gpu_spec"))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: gpu_spec: %w", path, r.line, err)
		}
		if gpus == 1 && milli < 1000 {
			shared++
		}
		jobs = append(jobs, Job{ID: r.get("name"), Submit: created, Duration: deleted - sched,
			GPUs: gpus, Models: models, Tier: q.tier, Kind: q.kind})
	}
	d := finishConverted(jobs, opt)
	d.Sources = append([]string{fmt.Sprintf("demand: %s, %d pods -> %d jobs; skipped %d CPU-only, %d over 8 GPUs, "+
		"%d never scheduled, %d non-positive durations; %d GPU-sharing pods rounded up to 1 GPU; "+
		"QoS Guaranteed->gold, LS/Burstable->silver, BE->bronze",
		filepath.Base(path), len(rows.rows), len(jobs), cpuOnly, tooMany, unscheduled, nonPositive, shared)}, d.Sources...)
	return d, nil
}

// ConvertAlibaba2025 reads alibaba_v2025_disaggregated_DLRM_trace.csv:
// the instances with gpu_request >= 1 (rounded up to whole GPUs) whose
// scheduled and deletion times both fall inside the trace and differ by
// more than zero. They are long-running recommendation inference
// instances, so kind serving and tier silver (on demand, never
// preempted); the trace gives no sign of reservations, so none is gold.
// submit is creation_time, or scheduled_time where creation is missing.
// The trace names no GPU models: any model will do.
func ConvertAlibaba2025(path string, opt ConvertOptions) (*Demand, error) {
	rows, err := readTraceCSV(path, "instance_sn", "gpu_request", "creation_time", "scheduled_time", "deletion_time")
	if err != nil {
		return nil, err
	}
	var jobs []Job
	var noGPU, unknown, nonPositive, tooMany int
	for _, r := range rows.rows {
		req, err := strconv.ParseFloat(r.get("gpu_request"), 64)
		if err != nil || req < 0 || math.IsInf(req, 0) {
			return nil, fmt.Errorf("%s:%d: gpu_request %q is not a number of GPUs", path, r.line, r.get("gpu_request"))
		}
		gpus := int(math.Ceil(req))
		switch {
		case gpus < 1:
			noGPU++
			continue
		case gpus > 8:
			tooMany++
			continue
		case r.get("scheduled_time") == "" || r.get("deletion_time") == "":
			unknown++
			continue
		}
		sched, err1 := traceSeconds(r.get("scheduled_time"))
		deleted, err2 := traceSeconds(r.get("deletion_time"))
		submit, err3 := sched, error(nil)
		if c := r.get("creation_time"); c != "" {
			submit, err3 = traceSeconds(c)
		}
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("%s:%d: a time is not a number of seconds", path, r.line)
		}
		if deleted-sched <= 0 {
			nonPositive++
			continue
		}
		jobs = append(jobs, Job{ID: r.get("instance_sn"), Submit: submit, Duration: deleted - sched,
			GPUs: gpus, Tier: auction.Silver, Kind: KindServing})
	}
	d := finishConverted(jobs, opt)
	d.Sources = append([]string{fmt.Sprintf("demand: %s, %d instances -> %d jobs; skipped %d without GPUs, %d over 8 GPUs, "+
		"%d with times outside the trace, %d non-positive durations; all silver serving, any model",
		filepath.Base(path), len(rows.rows), len(jobs), noGPU, tooMany, unknown, nonPositive)}, d.Sources...)
	return d, nil
}

// traceSeconds reads a trace time (whole or fractional seconds) to whole
// seconds.
func traceSeconds(s string) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > maxSeconds {
		return 0, fmt.Errorf("%q is not seconds 0..%d", s, maxSeconds)
	}
	return int64(math.Round(f)), nil
}

// mapModels maps a gpu_spec ("V100M16|V100M32") to public models, each
// once; an empty spec is any model. Codes outside the table are kept.
func mapModels(spec string) ([]string, error) {
	if spec == "" {
		return nil, nil
	}
	var out []string
	for _, code := range strings.Split(spec, "|") {
		name := strings.TrimSpace(code)
		if m, ok := modelFor(name); ok {
			name = m.Name
		}
		if !nameOK(name, "._+-") {
			return nil, fmt.Errorf("%q is not a GPU model code", code)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// finishConverted sorts jobs by submit, keeps opt.MaxJobs of them at
// random, and rebases times so that the first submit is 0.
func finishConverted(jobs []Job, opt ConvertOptions) *Demand {
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit < jobs[b].Submit })
	note := "all kept"
	if opt.MaxJobs > 0 && len(jobs) > opt.MaxJobs {
		r := rand.New(rand.NewPCG(opt.Seed, streamConvert))
		keep := r.Perm(len(jobs))[:opt.MaxJobs]
		sort.Ints(keep)
		sub := make([]Job, len(keep))
		for i, k := range keep {
			sub[i] = jobs[k]
		}
		note = fmt.Sprintf("a random %d of %d kept (seed %d)", opt.MaxJobs, len(jobs), opt.Seed)
		jobs = sub
	}
	if len(jobs) > 0 {
		base := jobs[0].Submit
		for i := range jobs {
			jobs[i].Submit -= base
		}
	}
	if opt.MaxDuration > 0 {
		capped := 0
		for i := range jobs {
			if jobs[i].Duration > opt.MaxDuration {
				jobs[i].Duration = opt.MaxDuration
				capped++
			}
		}
		note += fmt.Sprintf("; %d durations capped at %d s", capped, opt.MaxDuration)
	}
	return &Demand{Jobs: jobs, Renters: []Behaviour{Honest},
		Sources: []string{"demand: " + note + "; times rebased to the first submit"}}
}
