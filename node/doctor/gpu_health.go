package doctor

import (
	"fmt"
	"strings"

	"github.com/gleaner-net/gleaner/attest"
)

// gpuHealthFix is what an owner does about GPU index that doctor warns
// of: look at it, and clear the fault once it is sound (a running node withdraws a
// faulty GPU until its owner clears it or the node restarts; see
// attest/health.go).
func gpuHealthFix(index int) string {
	return fmt.Sprintf("inspect it with `nvidia-smi -q -i %d` (and the kernel log for Xid: `dmesg | grep -i xid`); once it is sound, "+
		"`gleaner offer clear-fault --gpu %d` offers it again on a running node (or restart the node)", index, index)
}

// gpuHealthChecks warns, per GPU read through NVML, of one the node will
// not offer: in MIG mode (attest.MIGReason), or with a fault the driver
// reported (Xid critical errors, uncorrected ECC errors). Simulated GPUs
// have no health to report: no lines.
func gpuHealthChecks(rep nvmlReport) []Check {
	if rep.Simulated {
		return nil
	}
	var out []Check
	for _, g := range rep.Devices {
		if g.Simulated {
			continue
		}
		name := fmt.Sprintf("gpu %d", g.Index)
		if g.MIG {
			out = append(out, Check{Name: name, Status: StatusWarn,
				Detail: gpuLabel(g) + " is not offered: " + attest.MIGReason,
				Fix:    "to offer the whole GPU, disable MIG mode: sudo nvidia-smi -i " + fmt.Sprint(g.Index) + " -mig 0 (then reset the GPU or reboot), and restart the node"})
		}
		if faults := gpuFaults(g.Health); len(faults) > 0 {
			out = append(out, Check{Name: name, Status: StatusWarn,
				Detail: gpuLabel(g) + " reported a fault: " + strings.Join(faults, "; ") + "; a running node that sees a new one stops the GPU's jobs and withdraws it until `gleaner offer clear-fault` or a restart",
				Fix:    gpuHealthFix(g.Index)})
		}
	}
	return out
}

// gpuFaults says what of h is a fault. Doctor reads the driver once, so
// the ECC count since the driver loaded is reported as it stands (the
// node counts only a rise as a new fault).
func gpuFaults(h attest.Health) []string {
	var out []string
	if h.XidKnown && h.Xids > 0 {
		out = append(out, fmt.Sprintf("%d Xid critical error(s), the last Xid %d", h.Xids, h.LastXid))
	}
	if h.ECCKnown && h.ECCUncorrected > 0 {
		out = append(out, fmt.Sprintf("%d uncorrected ECC memory error(s) since the driver loaded", h.ECCUncorrected))
	}
	return out
}

func gpuLabel(g attest.GPU) string {
	if g.UUID == "" {
		return g.Name
	}
	return g.Name + " (" + g.UUID + ")"
}
