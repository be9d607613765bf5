package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/node/doctor"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/urfave/cli/v2"
)

const doctorHelp = `Checks whether this host can run a node that others can reach and rent
from, and prints each check as pass, warn, fail or skip, with the fix:

   repo            the repo, identity.key and rpc.token are yours alone (not group/world-readable)
   disk            free space where the repo and the block store (<repo>/data) live
   service firewall
                   the iptables rule that keeps service jobs off this host's own listeners
                   (INPUT -i glsvc+ ... DROP, docs/SERVICES.md); checking it needs root
   docker          the Docker engine answers and is new enough (API 1.40, Docker 19.03)
   gpu             the NVIDIA driver (NVML) and its GPUs; without one, says the host can
                   offer only simulated GPUs
   nvidia runtime  Docker has the nvidia runtime (and which NVIDIA CDI devices it found)
   gpu container   nvidia-smi sees the GPUs inside a container (--gpu-image; run only when
                   the runtime exists and the image is already here: doctor never pulls)
   listen          the running node's listen addresses
   nat             AutoNAT's answer: can peers dial this node directly?
   clock           the clock skew against connected peers (warn over 2 s, fail over 30 s)

--gpu-check runs only the GPU check instead (docs/INSTALL.md): NVML's
inventory, telemetry samples of the first GPU signed and verified, and a
container given that GPU alone by UUID, where nvidia-smi -L must list it
and no other; with --cuda-probe-image and --cuda-probe (make gpu-check
builds both) also a job that opens a CUDA context on that GPU, which must
keep it offered, and the same probe on the host, which must withdraw it.
Without a GPU it prints "no NVIDIA GPU: skipped" and exits 0.

listen, nat and clock need the daemon; without one they are skipped and the
rest still run. Exit code 0 when no check failed (warnings included), 1 when
one did. For scripts:

   gleaner doctor --json | jq '.checks[] | select(.status != "pass")'`

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:        "doctor",
		Usage:       "check this host and node: repo, disk, Docker, GPU, ports, NAT, clock",
		Description: doctorHelp,
		Flags: []cli.Flag{
			jsonFlag,
			&cli.StringFlag{Name: "gpu-image", Value: doctor.DefaultGPUImage, Usage: "image for the GPU test container (must have nvidia-smi; never pulled)"},
			&cli.BoolFlag{Name: "gpu-check", Usage: "instead, prove the GPU path on this host: NVML inventory, signed telemetry, a container on one GPU by UUID, a CUDA job (make gpu-check)"},
			&cli.StringFlag{Name: "cuda-probe-image", Usage: "--gpu-check: a local image whose entrypoint is node/doctor/cudaprobe, run as a job on the leased GPU (scripts/gpu-check.sh builds it)"},
			&cli.StringFlag{Name: "cuda-probe", Usage: "--gpu-check: the cudaprobe binary, run on the host as a process of no job (scripts/gpu-check.sh builds it)"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("see `gleaner doctor --help`", "unexpected argument %q", c.Args().First())
			}
			image := strings.TrimSpace(c.String("gpu-image"))
			if image == "" {
				return usagef("for example: --gpu-image "+doctor.DefaultGPUImage, "--gpu-image must name an image")
			}
			if c.Bool("gpu-check") {
				// The CUDA job holds its GPU for up to a minute or two.
				ctx, cancel := context.WithTimeout(c.Context, 5*time.Minute)
				defer cancel()
				return gpuCheck(c, doctor.GPUCheck(ctx, doctor.GPUCheckOptions{Image: image,
					ProbeImage: strings.TrimSpace(c.String("cuda-probe-image")), ProbeBin: strings.TrimSpace(c.String("cuda-probe"))}))
			}
			ctx, cancel := context.WithTimeout(c.Context, time.Minute)
			defer cancel()
			rep := runDoctor(ctx, c.String("repo"), image)
			if err := emit(c, rep, func(w io.Writer) { printDoctor(w, rep) }); err != nil {
				return err
			}
			if !rep.OK {
				return withHint(fmt.Errorf("%d check(s) failed: %s", len(rep.failed()), strings.Join(rep.failed(), ", ")),
					"do what each failed check's fix says, then run `gleaner doctor` again")
			}
			return nil
		},
	}
}

// doctorReport is doctor's output; --json prints it as is.
type doctorReport struct {
	OK     bool           `json:"ok"` // no check failed
	Checks []doctor.Check `json:"checks"`
}

func (r doctorReport) failed() []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status == doctor.StatusFail {
			out = append(out, c.Name)
		}
	}
	return out
}

func runDoctor(ctx context.Context, dir, image string) doctorReport {
	checks := doctor.LocalChecks(ctx, doctor.Options{RepoDir: dir, GPUImage: image})
	checks = append(checks, daemonChecks(ctx, dir)...)
	return doctorReport{OK: !doctor.Failed(checks), Checks: checks}
}

// daemonChecks asks the running daemon, if any, for what only it knows.
func daemonChecks(ctx context.Context, dir string) []doctor.Check {
	r, err := repo.OpenRepo(dir)
	if err != nil {
		return doctor.DaemonSkipped("no repo at " + dir + " (see the repo check)")
	}
	url, err := r.URL()
	if errors.Is(err, repo.ErrNotRunning) {
		return doctor.DaemonSkipped("daemon not running (start it with gleaner daemon)")
	}
	tok, terr := r.Token()
	if err != nil || terr != nil {
		return doctor.DaemonSkipped("cannot reach the daemon: " + errors.Join(err, terr).Error())
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var res doctor.Result
	err = rpc.NewClient(url, tok).Call(cctx, "node_doctor", nil, &res)
	switch {
	case errors.Is(err, rpc.ErrUnreachable):
		return doctor.DaemonSkipped("no daemon answers at " + url + " (it may have crashed; start it with gleaner daemon)")
	case err != nil:
		// The daemon's view cannot be judged: a warning, with the fix for
		// why, rather than a failed host.
		fix := doctorCallFix(err)
		out := doctor.DaemonSkipped("node_doctor: " + err.Error())
		for i := range out {
			out[i].Status, out[i].Fix = doctor.StatusWarn, fix
		}
		return out
	}
	return doctor.DaemonChecks(res)
}

// doctorCallFix is the fix for a node_doctor call that failed: only a
// daemon without the method (one older than this gleaner) is fixed by a
// restart on this version.
func doctorCallFix(err error) string {
	var re *rpc.Error
	switch {
	case errors.As(err, &re) && re.Code == rpc.CodeMethodNotFound:
		return "the daemon is older than this gleaner: restart it on this version (gleaner daemon)"
	case errors.As(err, &re) && (re.Code == rpc.CodeUnauthorized || re.Code == rpc.CodeForbidden):
		return "the daemon refused the token: check that --repo (or GLEANER_REPO) names the daemon's repo and that its rpc.token is the one the daemon started with (restart the daemon if the token was replaced)"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return "the daemon did not answer within 5 s: it is busy or stuck; look at its log, and restart it if it stays so"
	default:
		return "look at the daemon's log for this error, and run doctor again"
	}
}

func printDoctor(w io.Writer, r doctorReport) {
	counts := map[string]int{}
	rows := [][]string{}
	for _, c := range r.Checks {
		counts[c.Status]++
		rows = append(rows, []string{strings.ToUpper(c.Status), c.Name, c.Detail})
		if c.Fix != "" && c.Status != doctor.StatusPass {
			rows = append(rows, []string{"", "", "fix: " + c.Fix})
		}
	}
	table(w, rows)
	fmt.Fprintf(w, "\n%d passed, %d warned, %d failed, %d skipped\n",
		counts[doctor.StatusPass], counts[doctor.StatusWarn], counts[doctor.StatusFail], counts[doctor.StatusSkip])
}
