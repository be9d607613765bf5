package attest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// MaxSimulatedGPUs bounds a simulated machine; 16 is the most NVML-visible
// GPUs any real server ships with, so larger specs are typos.
const MaxSimulatedGPUs = 16

// SimSpec is one part of a simulate spec: Count GPUs of one Model.
type SimSpec struct {
	Model string // canonical, as in KnownModels
	Count int
}

var simPart = regexp.MustCompile(`^(\d+)\s*[xX]\s*(.*)$`)

// ParseSimulateSpec parses "2xRTX4090", "1xH100,2xA100-80GB" or "RTX4090"
// (one GPU). Models match KnownModels case-insensitively and come back in
// canonical spelling. Errors name the part at fault.
func ParseSimulateSpec(spec string) ([]SimSpec, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, errors.New("simulate spec is empty; want e.g. 2xRTX4090 or 1xH100,2xA100-80GB")
	}
	byUpper := make(map[string]string, len(catalogue))
	for m := range catalogue {
		byUpper[strings.ToUpper(m)] = m
	}
	var out []SimSpec
	total := 0
	for i, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("simulate spec %q: part %d is empty", spec, i+1)
		}
		count, model := 1, part
		if m := simPart.FindStringSubmatch(part); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil || n < 1 || n > MaxSimulatedGPUs {
				return nil, fmt.Errorf("simulate spec part %q: count %s is not in 1..%d", part, m[1], MaxSimulatedGPUs)
			}
			count, model = n, strings.TrimSpace(m[2])
		}
		if model == "" {
			return nil, fmt.Errorf("simulate spec part %q: no model after the count", part)
		}
		canon, ok := byUpper[strings.ToUpper(model)]
		if !ok {
			return nil, fmt.Errorf("simulate spec part %q: unknown model %q; known models: %s",
				part, model, strings.Join(KnownModels(), ", "))
		}
		total += count
		out = append(out, SimSpec{Model: canon, Count: count})
	}
	if total > MaxSimulatedGPUs {
		return nil, fmt.Errorf("simulate spec %q: %d GPUs in all, more than %d", spec, total, MaxSimulatedGPUs)
	}
	return out, nil
}

// Simulated is a Source of labelled stand-in GPUs for machines without
// one: development, tests, and the market simulator. Every GPU and the
// inventory say Simulated, so a simulated GPU can never pass as real.
type Simulated struct {
	mu     sync.Mutex // guards everything below
	gpus   []simGPU
	tick   uint64 // Inventory calls so far; drives the idle jitter
	closed bool
}

type simGPU struct {
	spec modelSpec
	id   GPU      // identity fields, fixed at construction
	load *simLoad // nil while idle
}

type simLoad struct {
	tempC  int
	powerW float64
	procs  []Process
}

// NewSimulated returns a simulated Source for spec (see ParseSimulateSpec),
// with UUIDs derived from the spec alone. Nodes should prefer
// NewSimulatedSeed with their peer ID, so that two nodes simulating the same
// hardware do not present the same UUIDs to the market.
func NewSimulated(spec string) (Source, error) {
	s, err := NewSimulatedSeed(spec, "")
	if err != nil {
		return nil, err // a typed nil would make a non-nil Source
	}
	return s, nil
}

// NewSimulatedSeed is NewSimulated with UUIDs derived from seed, each
// GPU's model and its index. The same seed gives the same UUIDs across
// restarts, and appending GPUs to a spec keeps the earlier ones' UUIDs.
func NewSimulatedSeed(spec, seed string) (*Simulated, error) {
	parts, err := ParseSimulateSpec(spec)
	if err != nil {
		return nil, err
	}
	s := &Simulated{}
	for _, p := range parts {
		ms := catalogue[p.Model]
		for range p.Count {
			i := len(s.gpus)
			s.gpus = append(s.gpus, simGPU{spec: ms, id: GPU{
				Index:       i,
				UUID:        simUUID(seed, i, p.Model),
				Model:       p.Model,
				Name:        "Simulated " + ms.Name,
				VRAMMiB:     ms.VRAMMiB,
				ComputeCap:  ms.ComputeCap,
				PowerLimitW: ms.PowerLimitW,
				Simulated:   true,
			}})
		}
	}
	return s, nil
}

// simUUID looks like an NVML UUID but says SIM- where NVML says GPU-.
func simUUID(seed string, index int, model string) string {
	h := sha256.Sum256(fmt.Appendf(nil, "gleaner-sim\x00%s\x00%d\x00%s", seed, index, model))
	return fmt.Sprintf("SIM-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// SetLoad makes GPU index report exactly this temperature, power draw and
// compute processes (no jitter) until Idle, so tests and demos can show an
// owner's process or a heat limit withdrawing a simulated GPU.
func (s *Simulated) SetLoad(index int, tempC int, powerW float64, procs []Process) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index < 0 || index >= len(s.gpus) {
		return fmt.Errorf("simulated GPU %d does not exist (have %d)", index, len(s.gpus))
	}
	s.gpus[index].load = &simLoad{tempC: tempC, powerW: powerW, procs: append([]Process(nil), procs...)}
	return nil
}

// Idle returns GPU index to its idle readings.
func (s *Simulated) Idle(index int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index < 0 || index >= len(s.gpus) {
		return fmt.Errorf("simulated GPU %d does not exist (have %d)", index, len(s.gpus))
	}
	s.gpus[index].load = nil
	return nil
}

// Inventory returns the current readings. Idle GPUs wander by a degree or
// two and a few percent of power, deterministically per call, so that
// dashboards and telemetry chains look live yet tests stay repeatable.
func (s *Simulated) Inventory(ctx context.Context) (Inventory, error) {
	if err := ctx.Err(); err != nil {
		return Inventory{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Inventory{}, errors.New("attest: simulated source is closed")
	}
	s.tick++
	inv := Inventory{DriverVersion: "simulated", CUDAVersion: "12.8", Simulated: true, Source: "simulated"}
	for _, sg := range s.gpus {
		g := sg.id
		used := 0
		if l := sg.load; l != nil {
			g.TempC, g.PowerW = l.tempC, l.powerW
			g.Processes = append([]Process(nil), l.procs...)
			for _, p := range l.procs {
				used += p.UsedMiB
			}
		} else {
			h := sha256.Sum256(fmt.Appendf(nil, "%s/%d", g.UUID, s.tick))
			r := binary.BigEndian.Uint64(h[:8])
			g.TempC = sg.spec.IdleTempC + int(r%4) - 1                   // -1..+2 °C
			jitter := 0.95 + float64((r>>8)%101)/1000                    // ±5 %
			g.PowerW = math.Round(sg.spec.IdlePowerW*jitter*1000) / 1000 // NVML's mW resolution
		}
		g.UtilPct = utilFromPower(g.PowerW, sg.spec)
		g.VRAMFreeMiB = max(g.VRAMMiB-used, 0)
		inv.GPUs = append(inv.GPUs, g)
	}
	return inv, nil
}

// utilFromPower derives utilisation from where the draw sits between idle
// and the limit, so a loaded simulated GPU reports a consistent story.
func utilFromPower(powerW float64, ms modelSpec) int {
	span := ms.PowerLimitW - ms.IdlePowerW
	if span <= 0 || powerW <= ms.IdlePowerW*1.1 {
		return 0
	}
	return min(int((powerW-ms.IdlePowerW)/span*100), 100)
}

// Close stops the source; Inventory fails afterwards, as NVML's does.
func (s *Simulated) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
