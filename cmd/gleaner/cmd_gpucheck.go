package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gleaner-net/gleaner/node/doctor"
	"github.com/urfave/cli/v2"
)

// gpuCheck prints `gleaner doctor --gpu-check`'s report and fails when a
// check did; a host without a GPU prints the skip line and passes.
func gpuCheck(c *cli.Context, r doctor.GPUCheckReport) error {
	rep := doctorReport{OK: !doctor.Failed(r.Checks), Checks: r.Checks}
	err := emit(c, r, func(w io.Writer) {
		if r.Skipped {
			fmt.Fprintln(w, r.Checks[0].Detail) // the skip line, and why
			return
		}
		printDoctor(w, rep)
		for _, k := range []struct{ key, what string }{
			{"nvml_inventory_ms", "NVML inventory"},
			{"sign_verify_ms", "a telemetry sample signed and verified"},
			{"lease_to_first_cuda_call_ms", "a job's start to its first CUDA call"},
		} {
			if v, ok := r.Timings[k.key]; ok {
				fmt.Fprintf(w, "time: %s: %.3f ms\n", k.what, v)
			}
		}
	})
	if err != nil {
		return err
	}
	if !rep.OK {
		return withHint(fmt.Errorf("GPU check: %d check(s) failed: %s", len(rep.failed()), strings.Join(rep.failed(), ", ")),
			"do what each failed check's fix says, then run `make gpu-check` again")
	}
	return nil
}
