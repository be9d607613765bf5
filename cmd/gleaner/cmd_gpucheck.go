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
