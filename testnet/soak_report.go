package testnet

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// SoakReport is what a soak did and found. Violations are the end checks
// that failed; a soak passes with none.
type SoakReport struct {
	Seed     uint64 `json:"seed"`
	Duration string `json:"duration"`

	// The faults injected.
	Faults      int      `json:"faults_scheduled"`
	Kills       int      `json:"kills"` // kill -9 of a provider or a renter
	CleanStops  int      `json:"clean_stops"`
	Restarts    int      `json:"restarts"`
	Partitions  int      `json:"partitions"`
	FaultErrors []string `json:"fault_errors,omitempty"`

	// The jobs.
	Submitted     int            `json:"jobs_submitted"`
	SubmitRefused int            `json:"submits_refused"` // the renter went down as the soak submitted
	Completed     int            `json:"jobs_completed"`
	Ended         map[string]int `json:"jobs_ended_with_reason"` // by the reason's first clause
	Lost          int            `json:"jobs_lost"`              // never ended, or ended without a reason

	// Recovery: jobs running on a provider when it was killed or stopped,
	// and the time until each ran on another provider.
	Displaced   int    `json:"jobs_displaced"`
	Recovered   int    `json:"jobs_running_elsewhere"`
	RecoveryP50 string `json:"recovery_p50,omitempty"`
	RecoveryP95 string `json:"recovery_p95,omitempty"`
	recoveries  []time.Duration

	// Ledger convergence after each heal: until every node held what any
	// node held at the heal.
	Heals          int    `json:"heals"`
	HealsConverged int    `json:"heals_converged_within_1m"`
	ConvergeP50    string `json:"converge_p50,omitempty"`
	ConvergeMax    string `json:"converge_max,omitempty"`
	converges      []time.Duration
	// FinalConvergence: identical heads on every node, from the last job's end.
	FinalConvergence string `json:"final_convergence,omitempty"`
	SettleTime       string `json:"settle_time,omitempty"` // from the end of the faults to every job ended

	// The end checks.
	FalseConvictions       int      `json:"false_convictions"`
	DoubleBookedGPUSeconds int64    `json:"double_booked_gpu_seconds"`
	Leases                 int      `json:"leases_audited"`
	Settlements            int      `json:"settlements_audited"`
	Violations             []string `json:"violations"`
}

func (r *SoakReport) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// Failed reports whether any end check failed.
func (r *SoakReport) Failed() bool { return len(r.Violations) > 0 }

func (r *SoakReport) recovered(d time.Duration) {
	r.Recovered++
	r.recoveries = append(r.recoveries, d)
	r.RecoveryP50, r.RecoveryP95 = quantile(r.recoveries, 0.5), quantile(r.recoveries, 0.95)
}

func (r *SoakReport) healed(d time.Duration, ok bool) {
	r.Heals++
	if !ok {
		return
	}
	r.HealsConverged++
	r.converges = append(r.converges, d)
	r.ConvergeP50, r.ConvergeMax = quantile(r.converges, 0.5), quantile(r.converges, 1)
}

func (r *SoakReport) recoverySeconds(q float64) float64 { return quantileOf(r.recoveries, q).Seconds() }
func (r *SoakReport) convergeSeconds() float64          { return quantileOf(r.converges, 1).Seconds() }

// quantileOf is the q-quantile of ds by nearest rank; 0 for none.
func quantileOf(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// quantile is the q-quantile of ds (nearest rank), rounded for reading.
func quantile(ds []time.Duration, q float64) string {
	if len(ds) == 0 {
		return ""
	}
	return quantileOf(ds, q).Round(100 * time.Millisecond).String()
}

// WriteText writes the report for a person.
func (r *SoakReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "fault soak, seed %d, %s of faults\n", r.Seed, r.Duration)
	fmt.Fprintf(w, "  faults:      %d kill -9, %d clean stops, %d restarts, %d partitions (%d scheduled)\n",
		r.Kills, r.CleanStops, r.Restarts, r.Partitions, r.Faults)
	fmt.Fprintf(w, "  jobs:        %d submitted, %d completed, %d ended with a reason, %d lost (%d submits refused by a renter going down)\n",
		r.Submitted, r.Completed, sum(r.Ended), r.Lost, r.SubmitRefused)
	keys := make([]string, 0, len(r.Ended))
	for k := range r.Ended {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "               %4d  %s\n", r.Ended[k], k)
	}
	fmt.Fprintf(w, "  recovery:    %d jobs on a provider that went down, %d ran elsewhere: p50 %s, p95 %s\n",
		r.Displaced, r.Recovered, or(r.RecoveryP50, "-"), or(r.RecoveryP95, "-"))
	fmt.Fprintf(w, "  ledger:      %d heals, %d converged within 1 min (p50 %s, max %s); identical heads %s after the last job\n",
		r.Heals, r.HealsConverged, or(r.ConvergeP50, "-"), or(r.ConvergeMax, "-"), or(r.FinalConvergence, "never"))
	fmt.Fprintf(w, "  checks:      %d false convictions, %d double-booked GPU-seconds, %d leases and %d settlements audited\n",
		r.FalseConvictions, r.DoubleBookedGPUSeconds, r.Leases, r.Settlements)
	for _, e := range r.FaultErrors {
		fmt.Fprintf(w, "  fault error: %s\n", e)
	}
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "  PASS: every end check held")
		return
	}
	fmt.Fprintf(w, "  FAIL: %d violations\n    %s\n", len(r.Violations), strings.Join(r.Violations, "\n    "))
}

func sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
