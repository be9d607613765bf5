package attest

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
)

// Health is what the driver reports of a GPU's soundness. A reading the
// driver does not support leaves its Known flag false: the health is
// then unknown, which is no fault (consumer GPUs have no ECC, and some
// drivers deliver no events). The simulated source reports nothing, so
// its GPUs never fault; a GPU is judged by what its source reports, not
// by whether it is simulated (a test's Fake may report health for a
// simulated GPU, which a job container can run on without a device).
type Health struct {
	// ECCUncorrected is the driver's volatile count of uncorrected ECC
	// memory errors. Volatile counts restart when the driver loads, so a
	// count the node finds at start is history; only a rise is news.
	ECCUncorrected uint64 `json:"ecc_uncorrected,omitempty"`
	ECCKnown       bool   `json:"ecc_known,omitempty"`
	// Xids counts the Xid critical errors the driver reported for the GPU
	// since the Source opened, every one of them news; LastXid is the
	// latest one's code (e.g. 79: the GPU fell off the bus).
	Xids     int    `json:"xids,omitempty"`
	LastXid  uint64 `json:"last_xid,omitempty"`
	XidKnown bool   `json:"xid_known,omitempty"`
}

// Fault kinds, the labels of the node's gpu_faults_total metric.
const (
	FaultXid = "xid"
	FaultECC = "ecc"
)

// MIGReason is why a GPU in MIG mode is withdrawn. Offering its
// instances as units of their own would need each instance's profile
// (memory slice, compute share) in the offer, the matcher and pricing to
// know a slice from a whole GPU, telemetry per instance, and the executor
// to hand a container one MIG UUID; until then the honest choice is to
// offer none of the GPU.
const MIGReason = "in MIG mode: its instances are not offered yet"

// healthWatch is the Monitor's memory of each GPU's health, by UUID. A
// fault latches: the GPU stays withdrawn until the owner clears it
// (Monitor.ClearFault, `gleaner offer clear-fault`) or the node restarts,
// since a GPU that raised an Xid or lost memory cells is not to be trusted
// with a stranger's job again before its owner has looked at it.
type healthWatch struct {
	gpus    map[string]*gpuHealth
	byIndex map[int]*gpuHealth // the GPU each index named when last read
	counts  map[string]uint64  // faults detected, by kind
}

type gpuHealth struct {
	xids   int    // Xids already counted
	ecc    uint64 // the last uncorrected ECC count read
	eccSet bool   // ecc holds a reading (the first is the baseline)
	fault  string // why the GPU faulted; "" while it has not
}

func newHealthWatch() healthWatch {
	return healthWatch{gpus: map[string]*gpuHealth{}, byIndex: map[int]*gpuHealth{}, counts: map[string]uint64{FaultXid: 0, FaultECC: 0}}
}

// check notes g's health and returns why g is faulted, "" if it is not.
func (w *healthWatch) check(g GPU) string {
	key := g.UUID
	if key == "" {
		key = "index " + strconv.Itoa(g.Index)
	}
	h := w.gpus[key]
	if h == nil {
		h = &gpuHealth{}
		w.gpus[key] = h
	}
	w.byIndex[g.Index] = h
	hl := g.Health
	if hl.XidKnown && hl.Xids > h.xids {
		w.counts[FaultXid] += uint64(hl.Xids - h.xids)
		h.xids = hl.Xids
		h.fault = fmt.Sprintf("the driver reported Xid %d, a critical GPU error", hl.LastXid)
	}
	if hl.ECCKnown {
		switch {
		case !h.eccSet:
			h.ecc, h.eccSet = hl.ECCUncorrected, true // history, not news
		case hl.ECCUncorrected > h.ecc:
			w.counts[FaultECC]++
			h.fault = fmt.Sprintf("uncorrected ECC memory errors rose from %d to %d", h.ecc, hl.ECCUncorrected)
			h.ecc = hl.ECCUncorrected
		case hl.ECCUncorrected < h.ecc:
			h.ecc = hl.ECCUncorrected // the driver reloaded: its counts restarted
		}
	}
	return h.fault
}

// FaultCounts returns how many GPU faults the Monitor has detected since
// it started, by kind (FaultXid: each Xid event; FaultECC: each rise of a
// GPU's uncorrected ECC count). Every kind is present, 0 included.
func (m *Monitor) FaultCounts() map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.health.counts)
}

// Errors of Monitor.ClearFault.
var (
	ErrNoSuchGPU  = errors.New("no GPU with that index")
	ErrNotFaulted = errors.New("the GPU is not faulted")
)

// ClearedFault is what Monitor.ClearFault cleared.
type ClearedFault struct {
	Fault string // why the GPU had faulted
	// AfterPoll is the last poll before the clear: an Availability whose
	// Poll is greater judged the GPU without the old fault.
	AfterPoll uint64
}

// ClearFault forgets the fault of the GPU numbered index in the latest
// inventory, as its owner does after inspecting the card. The readings
// that raised the fault stay counted (the Xids seen, the ECC count as
// last read), so the GPU is offered again from the next poll, which it
// asks Run for at once and which Run reports whether or not it changed,
// unless a new fault arrives: another Xid, a further rise of the ECC
// count. An index no inventory listed is ErrNoSuchGPU; a GPU without a
// fault, ErrNotFaulted.
func (m *Monitor) ClearFault(index int) (ClearedFault, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.seen[index] {
		return ClearedFault{}, fmt.Errorf("GPU %d: %w", index, ErrNoSuchGPU)
	}
	h := m.health.byIndex[index]
	if h == nil || h.fault == "" {
		return ClearedFault{}, fmt.Errorf("GPU %d: %w", index, ErrNotFaulted)
	}
	c := ClearedFault{Fault: h.fault, AfterPoll: m.polls}
	h.fault = ""
	// A new fault at once would leave the availability's key as it was;
	// the caller still waits for a poll after the clear to be reported.
	m.reported = false
	select {
	case m.poke <- struct{}{}:
	default: // a poll is asked for already
	}
	return c, nil
}
