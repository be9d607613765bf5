package attest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Withdrawal causes. Monitor compares causes rather than reason texts, so a
// hot GPU whose temperature wanders by a degree is not re-announced on
// every poll.
const (
	causeOwner     = "owner"
	causeUnknown   = "processes-unknown"
	causeTemp      = "temperature"
	causePower     = "power"
	causeUnread    = "unreadable"
	causeReadError = "read-error"
	causeHard      = "hard-limit"
	causeHealth    = "health"
	causeMIG       = "mig"
)

// Withdrawn reports whether the owner's rules take g out of the offer, and
// why in words fit for the owner's log. A GPU is withdrawn when it runs a
// compute process that is not in own (gleaner's own jobs, by host PID),
// when its process list cannot be read, or when it is over the owner's
// temperature or power limit (a zero limit is no limit). The owner's work
// comes first, so that reason wins when several apply. A job's process on
// a GPU its job did not lease is not the owner's: it does not withdraw
// the GPU, and Monitor reports it as an Escape. A GPU in MIG mode is
// withdrawn whoever uses it (MIGReason). Health faults are the Monitor's
// to judge, since they depend on earlier readings.
func Withdrawn(g GPU, lim Limits, own JobProcesses) (bool, string) {
	cause, reason, _ := withdrawal(g, lim, own)
	return cause != "", reason
}

func withdrawal(g GPU, lim Limits, own JobProcesses) (cause, reason string, escaped []Escape) {
	pids, escaped := processesOf(g, own)
	if g.MIG {
		return causeMIG, MIGReason, escaped
	}
	if len(pids) > 0 {
		slices.Sort(pids)
		s := make([]string, len(pids))
		for i, pid := range pids {
			s[i] = strconv.Itoa(pid)
		}
		return causeOwner, fmt.Sprintf("busy with the owner's processes (pid %s)", strings.Join(s, ", ")), escaped
	}
	if g.ProcessesUnknown {
		return causeUnknown, "its process list cannot be read, so the owner may be using it", escaped
	}
	if lim.MaxTempC > 0 && g.TempC > lim.MaxTempC {
		return causeTemp, fmt.Sprintf("temperature %d°C over limit %d°C", g.TempC, lim.MaxTempC), escaped
	}
	if lim.MaxPowerW > 0 && g.PowerW > lim.MaxPowerW {
		return causePower, fmt.Sprintf("power draw %s W over limit %s W", watts(g.PowerW), watts(lim.MaxPowerW)), escaped
	}
	return "", "", escaped
}

// overHardLimit says why g is over the owner's hard limits, "" if it is
// not.
func overHardLimit(g GPU, lim Limits) string {
	if lim.StopTempC > 0 && g.TempC > lim.StopTempC {
		return fmt.Sprintf("temperature %d°C over the hard limit %d°C", g.TempC, lim.StopTempC)
	}
	if lim.StopPowerW > 0 && g.PowerW > lim.StopPowerW {
		return fmt.Sprintf("power draw %s W over the hard limit %s W", watts(g.PowerW), watts(lim.StopPowerW))
	}
	return ""
}

// watts prints a power to 0.1 W without trailing zeros: "312.5", "300".
func watts(w float64) string {
	return strconv.FormatFloat(math.Round(w*10)/10, 'f', -1, 64)
}

// Availability is what the node may offer right now.
type Availability struct {
	Inventory Inventory      `json:"inventory"`
	Available []int          `json:"available"`           // GPU indexes, ascending
	Withdrawn map[int]string `json:"withdrawn,omitempty"` // GPU index -> reason
	// Stop are the GPUs over the owner's hard limits (Limits.StopTempC,
	// StopPowerW) or faulty (Faults): every job on them is stopped,
	// silver and gold too.
	Stop map[int]string `json:"stop,omitempty"` // GPU index -> reason
	// Faults are the GPUs the driver reported faulty (an Xid critical
	// error, a rise in uncorrected ECC errors), by index, with why. Each
	// is also in Withdrawn and Stop, and stays until the owner clears it
	// (Monitor.ClearFault) or the node restarts.
	Faults map[int]string `json:"faults,omitempty"`
	Err    string         `json:"error,omitempty"` // the Source failed: nothing is offered
	// Poll numbers the Monitor's checks, from 1: a caller that cleared a
	// fault (Monitor.ClearFault) knows an availability of a later poll
	// judged the GPU anew.
	Poll uint64 `json:"poll,omitempty"`
	// Escaped are job processes on GPUs their jobs did not lease, by
	// GPU then PID: each such job is to stop.
	Escaped []Escape `json:"escaped,omitempty"`
}

// DefaultMonitorInterval is short because the owner's own work must push
// gleaner off a GPU promptly; one NVML poll costs about a millisecond.
const DefaultMonitorInterval = 2 * time.Second

// Monitor polls a Source and tells the node, only when it changes, which
// GPUs the owner's rules allow it to offer, so a GPU leaves the offer as
// soon as the owner needs it and returns when it is idle again.
type Monitor struct {
	src    Source
	limits func() Limits
	own    func(context.Context) JobProcesses
	every  time.Duration

	poke chan struct{} // ClearFault asks Run for a poll now

	mu       sync.Mutex // guards the fields below; Check may race Run
	polls    uint64     // Checks that read the Source (Availability.Poll)
	reported bool
	lastKey  string
	seen     map[int]bool // every GPU index ever read, to name ones that vanish
	health   healthWatch
}

// NewMonitor returns a Monitor of src. limits and own are called on every
// poll so that changed settings and newly started jobs apply at once; own
// returns the processes of gleaner's running jobs, read after the
// inventory so that a job process the inventory lists is already there.
// Either may be nil (no limits; no own processes). every <= 0 means
// DefaultMonitorInterval.
func NewMonitor(src Source, limits func() Limits, own func(context.Context) JobProcesses, every time.Duration) *Monitor {
	if limits == nil {
		limits = func() Limits { return Limits{} }
	}
	if own == nil {
		own = noJobs
	}
	if every <= 0 {
		every = DefaultMonitorInterval
	}
	return &Monitor{src: src, limits: limits, own: own, every: every, seen: map[int]bool{}, health: newHealthWatch(),
		poke: make(chan struct{}, 1)}
}

// Check polls once and returns the availability and whether it differs
// from the last one Check returned (the first check always differs). The
// node may call it out of turn, e.g. right after a job starts or ends.
func (m *Monitor) Check(ctx context.Context) (Availability, bool) {
	inv, err := m.src.Inventory(ctx)
	if err != nil && ctx.Err() != nil {
		// Cut short by the caller, not a failing Source: record nothing.
		return Availability{Err: err.Error()}, false
	}
	lim, own := m.limits(), m.own(ctx)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.polls++
	av := Availability{Withdrawn: map[int]string{}, Poll: m.polls}
	causes := map[int]string{}
	if err != nil {
		// Fail closed: with no reading, no GPU can be shown to be free.
		av.Err = err.Error()
		for i := range m.seen {
			causes[i] = causeReadError
			av.Withdrawn[i] = "the GPU inventory could not be read: " + av.Err
		}
	} else {
		av.Inventory = inv
		present := map[int]bool{}
		for _, g := range inv.GPUs {
			present[g.Index], m.seen[g.Index] = true, true
			c, r, esc := withdrawal(g, lim, own)
			av.Escaped = append(av.Escaped, esc...)
			hard := overHardLimit(g, lim)
			if c == "" && hard != "" {
				c, r = causeHard, hard // over the hard limit is over any limit
			}
			if fault := m.health.check(g); fault != "" {
				// A faulty GPU is the news whatever else applies: its
				// jobs stop, like over a hard limit, and it stays out.
				c, r, hard = causeHealth, fault, fault
				if av.Faults == nil {
					av.Faults = map[int]string{}
				}
				av.Faults[g.Index] = fault
			}
			if c != "" {
				causes[g.Index], av.Withdrawn[g.Index] = c, r
			} else {
				av.Available = append(av.Available, g.Index)
			}
			if hard != "" {
				if av.Stop == nil {
					av.Stop = map[int]string{}
				}
				causes[g.Index] += "+stop"
				av.Stop[g.Index] = hard
			}
		}
		for i := range m.seen {
			if !present[i] {
				causes[i] = causeUnread
				av.Withdrawn[i] = "missing from the latest inventory (see its warnings)"
			}
		}
		slices.Sort(av.Available)
		sortEscapes(av.Escaped)
	}
	key := availabilityKey(av.Available, causes, av.Escaped, err != nil)
	changed := !m.reported || key != m.lastKey
	m.reported, m.lastKey = true, key
	return av, changed
}

// availabilityKey fingerprints what the node acts on: which GPUs are
// offerable, the kind of reason for the rest, and which jobs escaped onto
// which GPUs (not their PIDs: a job's new process on the same GPU is no
// news).
func availabilityKey(avail []int, causes map[int]string, escaped []Escape, failed bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v|%v|", failed, avail)
	esc := make([]string, len(escaped))
	for i, e := range escaped {
		esc[i] = fmt.Sprintf("%s@%d", e.Job, e.GPU)
	}
	slices.Sort(esc)
	fmt.Fprintf(&b, "%v|", slices.Compact(esc))
	idx := make([]int, 0, len(causes))
	for i := range causes {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		fmt.Fprintf(&b, "%d=%s;", i, causes[i])
	}
	return b.String()
}

// Run checks at once and then every interval (and at once after
// ClearFault), calling onChange (from this goroutine) whenever the
// availability changes, until ctx ends; it returns ctx's error. A failing
// Source does not stop it: it reports nothing available and recovers when
// the Source does.
func (m *Monitor) Run(ctx context.Context, onChange func(Availability)) error {
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		if av, changed := m.Check(ctx); changed {
			onChange(av)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-m.poke:
		}
	}
}
