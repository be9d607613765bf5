package doctor

import (
	"context"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/attest"
)

// Doctor warns, per GPU read through the driver, of one in MIG mode and
// of one with a fault (Xid, uncorrected ECC errors), saying what to do;
// a sound GPU, and every simulated one, adds no line, and the gpu check
// itself still passes.
func TestGPUChecksWarnOfMIGAndFaults(t *testing.T) {
	h100 := func(i int) attest.GPU {
		return attest.GPU{Index: i, UUID: "GPU-" + string(rune('a'+i)), Name: "NVIDIA H100",
			Health: attest.Health{XidKnown: true, ECCKnown: true}}
	}
	hw := attest.Inventory{Source: "nvml", DriverVersion: "550.54", CUDAVersion: "12.4",
		GPUs: []attest.GPU{h100(0), h100(1), h100(2), h100(3)}}
	hw.GPUs[1].MIG = true
	hw.GPUs[2].Health.Xids, hw.GPUs[2].Health.LastXid = 1, 79
	hw.GPUs[3].Health.ECCUncorrected = 3
	hw.GPUs[3].Health.XidKnown = false // a driver without events

	sim := hw.Clone()
	sim.Simulated, sim.Source = true, "simulated"
	for i := range sim.GPUs {
		sim.GPUs[i].Simulated = true
	}

	for _, tc := range []struct {
		name string
		inv  attest.Inventory
		want map[string][]string // check name -> what its detail and fix say
	}{
		{"real", hw, map[string][]string{
			"gpu 1": {"GPU-b", attest.MIGReason, "-mig 0"},
			"gpu 2": {"GPU-c", "Xid 79", "nvidia-smi -q -i 2", "offer clear-fault --gpu 2", "restart the node"},
			"gpu 3": {"3 uncorrected ECC", "nvidia-smi -q", "restart the node"},
		}},
		{"simulated", sim, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := attest.NewFake(tc.inv)
			read := func() (nvmlReport, error) {
				inv, err := fake.Inventory(context.Background())
				return reportOf(inv), err
			}
			cs := gpuChecks(context.Background(), Options{GPUImage: "cuda:test", NVML: read}, nil)
			got := map[string]Check{}
			for _, c := range cs {
				if strings.HasPrefix(c.Name, "gpu ") && c.Name != "gpu container" {
					got[c.Name] = c
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("health lines %+v, want %d", got, len(tc.want))
			}
			for name, has := range tc.want {
				c := got[name]
				if c.Status != StatusWarn {
					t.Errorf("%s: %+v, want a warning", name, c)
				}
				for _, h := range has {
					if !strings.Contains(c.Detail+" "+c.Fix, h) {
						t.Errorf("%s: %q / %q does not say %q", name, c.Detail, c.Fix, h)
					}
				}
			}
			if tc.name == "real" && byName(cs, "gpu").Status != StatusPass {
				t.Errorf("the gpu check failed for sound drivers: %+v", byName(cs, "gpu"))
			}
		})
	}
}
