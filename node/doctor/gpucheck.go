package doctor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// GPU check: `gleaner doctor --gpu-check` (`make gpu-check`) proves the
// node's GPU path on a machine with a real NVIDIA GPU, end to end but
// without a network: the inventory through NVML, as the daemon reads it;
// telemetry samples of the first GPU signed with a fresh key and verified
// as a renter verifies them (and a tampered one refused); and, where
// Docker has the nvidia runtime, a container given that one GPU by UUID
// as a job is given its lease, in which nvidia-smi -L must list that GPU
// and no other. On a machine without a GPU it skips, and passes.

// NoGPUSkipped is the line the GPU check prints on a machine without one.
const NoGPUSkipped = "no NVIDIA GPU: skipped"

// GPUCheckOptions says what the GPU check looks at; nil parts are the
// real ones.
type GPUCheckOptions struct {
	Image  string                        // has nvidia-smi; never pulled
	Source func() (attest.Source, error) // nil: attest.NewNVML
	Docker dockerProbe                   // nil: the engine from the environment
	// ProbeImage is a local image whose entrypoint is cudaprobe, and
	// ProbeBin the same program on the host (scripts/gpu-check.sh builds
	// both): the job checks (gpucheck_job.go) skip without them.
	ProbeImage, ProbeBin string
}

// GPUCheckReport is the check's result; Skipped with no GPU found.
type GPUCheckReport struct {
	Skipped bool    `json:"skipped"`
	Checks  []Check `json:"checks"`
	// Timings in milliseconds: nvml_inventory_ms (one NVML inventory
	// read), sign_verify_ms (one telemetry sample of real readings signed
	// and verified), lease_to_first_cuda_call_ms (a job's start asked for
	// to its CUDA context).
	Timings map[string]float64 `json:"timings_ms,omitempty"`
}

// GPUCheck runs the checks above.
func GPUCheck(ctx context.Context, o GPUCheckOptions) GPUCheckReport {
	open := o.Source
	if open == nil {
		open = attest.NewNVML
	}
	src, err := open()
	if err != nil {
		if errors.Is(err, attest.ErrNoGPU) {
			return GPUCheckReport{Skipped: true, Checks: []Check{{Name: "inventory", Status: StatusSkip, Detail: NoGPUSkipped + " (" + err.Error() + ")"}}}
		}
		return GPUCheckReport{Checks: []Check{{Name: "inventory", Status: StatusFail, Detail: "NVML: " + err.Error(), Fix: "check `nvidia-smi`; reinstall the NVIDIA driver"}}}
	}
	defer src.Close()
	timings := map[string]float64{}
	began := time.Now()
	inv, err := src.Inventory(ctx)
	timings["nvml_inventory_ms"] = ms(time.Since(began))
	inc := inventoryCheck(inv, err)
	if inc.Status != StatusPass {
		return GPUCheckReport{Checks: []Check{inc}}
	}
	inc.Detail += fmt.Sprintf(" (read in %.1f ms)", timings["nvml_inventory_ms"])
	g := inv.GPUs[0]
	out := []Check{inc, telemetryCheck(ctx, src, g.UUID, timings)}
	lc := leasedContainerCheck(ctx, o, g.UUID, len(inv.GPUs))
	out = append(out, lc)
	if lc.Status == StatusPass {
		out = append(out, jobChecks(ctx, o, src, g, timings)...)
	} else {
		out = append(out, Check{Name: "job on the GPU", Status: StatusSkip, Detail: "skipped: the leased container check did not pass"})
	}
	return GPUCheckReport{Checks: out, Timings: timings}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func inventoryCheck(inv attest.Inventory, err error) Check {
	c := Check{Name: "inventory", Status: StatusFail, Fix: "check `nvidia-smi`; reinstall the NVIDIA driver"}
	switch {
	case err != nil:
		c.Detail = "NVML inventory: " + err.Error()
	case len(inv.GPUs) == 0:
		c.Detail = "NVML lists no GPU"
	case inv.Simulated || inv.GPUs[0].Simulated:
		c.Detail, c.Fix = "the inventory is simulated; the GPU check needs a real one", "run it on a host with an NVIDIA GPU"
	default:
		var names []string
		for _, g := range inv.GPUs {
			names = append(names, g.Name+" "+g.UUID)
		}
		c.Status, c.Fix = StatusPass, ""
		c.Detail = fmt.Sprintf("%d GPU(s) through NVML: %s; driver %s, CUDA %s", len(inv.GPUs), strings.Join(names, ", "), inv.DriverVersion, inv.CUDAVersion)
	}
	return c
}

// telemetrySamples is how many readings the check signs and verifies.
const telemetrySamples = 3

// telemetryCheck signs telemetrySamples readings of the GPU uuid and
// verifies each as a renter would, then checks a sample with one byte
// changed is refused: a verifier that took anything would pass otherwise.
func telemetryCheck(ctx context.Context, src attest.Source, uuid string, timings map[string]float64) Check {
	c := Check{Name: "telemetry", Status: StatusFail, Fix: "a bug or a driver that cannot be read: report it with this output"}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		c.Detail = "key: " + err.Error()
		return c
	}
	id, _ := peer.IDFromPrivateKey(key)
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	sm, err := attest.NewSampler(key, "gpu-check", nonce, attest.UUIDHash(uuid))
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	v, err := attest.NewVerifier(id, "gpu-check", nonce)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	var last []byte
	var util []string
	var spent time.Duration // signing and verifying, not reading
	for i := 0; i < telemetrySamples; i++ {
		inv, err := src.Inventory(ctx)
		if err != nil {
			c.Detail = fmt.Sprintf("reading %d: %v", i+1, err)
			return c
		}
		g, ok := gpuByUUID(inv, uuid)
		if !ok {
			c.Detail = fmt.Sprintf("reading %d: GPU %s is gone", i+1, uuid)
			return c
		}
		signed := time.Now()
		_, wire, err := sm.Sign(g, time.Now())
		if err != nil {
			c.Detail = fmt.Sprintf("sign sample %d: %v", i+1, err)
			return c
		}
		s, err := v.Accept(wire, time.Now())
		if err != nil {
			c.Detail = fmt.Sprintf("verify sample %d: %v", i+1, err)
			return c
		}
		spent += time.Since(signed)
		if s.Simulated {
			c.Detail = fmt.Sprintf("sample %d says simulated", i+1)
			return c
		}
		util = append(util, fmt.Sprintf("%d%% %dW %dC", s.UtilPct, int(s.PowerW), s.TempC))
		last = wire
	}
	bad := append([]byte(nil), last...)
	bad[len(bad)-1] ^= 1
	if _, err := v.Accept(bad, time.Now()); err == nil {
		c.Detail = "a tampered sample was accepted"
		return c
	}
	c.Status, c.Fix = StatusPass, ""
	timings["sign_verify_ms"] = ms(spent / telemetrySamples)
	c.Detail = fmt.Sprintf("%d samples signed and verified (%s), %.3f ms a sample; a tampered one refused",
		telemetrySamples, strings.Join(util, "; "), timings["sign_verify_ms"])
	return c
}

func gpuByUUID(inv attest.Inventory, uuid string) (attest.GPU, bool) {
	for _, g := range inv.GPUs {
		if g.UUID == uuid {
			return g, true
		}
	}
	return attest.GPU{}, false
}
