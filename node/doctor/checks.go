package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/repo"
)

// Doctor: `gleaner doctor` asks whether this host can run a node that
// others can reach and rent from. Each check is a Check with a verdict and,
// unless it passed, the fix. The local checks here run in the CLI's
// process, with or without a daemon; the checks that need the running
// node's view (listen addresses, NAT, peers' clocks) come from the
// node_doctor method (api_doctor.go) and are judged by DaemonChecks.
// The service firewall check is doctor_firewall.go's.

// Verdicts of a check.
const (
	StatusPass = "pass"
	StatusWarn = "warn"
	StatusFail = "fail"
	StatusSkip = "skip" // could not be run here; Detail says why
)

// Check is one line of doctor's report.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Failed reports whether any check failed (doctor's exit code 1).
func Failed(cs []Check) bool {
	for _, c := range cs {
		if c.Status == StatusFail {
			return true
		}
	}
	return false
}

// Options says what the local checks look at.
type Options struct {
	RepoDir string
	// GPUImage is the image the GPU test container would run; it is only
	// run when Docker has the NVIDIA runtime and the image is already here.
	GPUImage string
	// Docker and NVML are the parts under test; nil means the real ones.
	Docker dockerProbe
	NVML   func() (nvmlReport, error)
	// FirewallRules checks the service firewall rule; nil means
	// executor.CheckServiceFirewall.
	FirewallRules func(context.Context) []executor.FirewallReport
}

// DefaultGPUImage is the image of doctor's GPU test container: NVIDIA's
// smallest CUDA image, which carries nvidia-smi via the container toolkit.
const DefaultGPUImage = "nvidia/cuda:12.4.1-base-ubuntu22.04"

// LocalChecks runs the checks that need no daemon: repo, disk, Docker and
// GPU. ctx bounds them all; each probe has a shorter deadline of its own.
func LocalChecks(ctx context.Context, o Options) []Check {
	if o.GPUImage == "" {
		o.GPUImage = DefaultGPUImage
	}
	if o.FirewallRules == nil {
		o.FirewallRules = executor.CheckServiceFirewall
	}
	out := RepoChecks(o.RepoDir)
	out = append(out, DiskChecks(o.RepoDir)...)
	out = append(out, ServiceFirewallCheck(ctx, o.RepoDir, o.FirewallRules))
	dp := o.Docker
	if dp == nil {
		d, err := newDockerProbe()
		if err != nil {
			out = append(out, dockerUnreachable(err))
			return append(out, gpuChecks(ctx, o, nil)...)
		}
		defer d.Close()
		dp = d
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	dc, v := dockerChecks(dctx, dp)
	out = append(out, dc...)
	if v == nil {
		dp = nil
	}
	return append(out, gpuChecks(ctx, o, dp)...)
}

// RepoChecks checks that the repo exists and that it and its secrets are
// the current user's alone: the identity key signs as this node, and the
// RPC token gives full control of it.
func RepoChecks(dir string) []Check {
	c := Check{Name: "repo"}
	st, err := os.Stat(dir)
	switch {
	case os.IsNotExist(err):
		c.Status, c.Detail, c.Fix = StatusFail, "no repo at "+dir, "create one with `gleaner init`, or point --repo at yours"
		return []Check{c}
	case err != nil:
		c.Status, c.Detail, c.Fix = StatusFail, err.Error(), "check the path and its permissions"
		return []Check{c}
	case !st.IsDir():
		c.Status, c.Detail, c.Fix = StatusFail, dir+" is not a directory", "point --repo at a repo directory"
		return []Check{c}
	}
	var problems []string
	var fixes []string
	check := func(path string, want os.FileMode) {
		st, err := os.Stat(path)
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		if st.Mode().Perm()&0o077 != 0 {
			problems = append(problems, fmt.Sprintf("%s is mode %v (readable by others)", filepath.Base(path), st.Mode().Perm()))
			fixes = append(fixes, fmt.Sprintf("chmod %o %s", want, path))
		}
		if uid, ok := fileOwner(st); ok && uid != os.Getuid() {
			problems = append(problems, fmt.Sprintf("%s is owned by uid %d, not you (uid %d)", filepath.Base(path), uid, os.Getuid()))
			fixes = append(fixes, fmt.Sprintf("sudo chown %d %s", os.Getuid(), path))
		}
	}
	check(dir, 0o700)
	check(filepath.Join(dir, repo.IdentityFile), 0o600)
	check(filepath.Join(dir, repo.TokenFile), 0o600)
	if len(problems) == 0 {
		c.Status, c.Detail = StatusPass, dir+", "+repo.IdentityFile+" and "+repo.TokenFile+" are yours alone"
		return []Check{c}
	}
	c.Status, c.Detail = StatusFail, strings.Join(problems, "; ")
	c.Fix = strings.Join(fixes, "; ")
	if c.Fix == "" {
		c.Fix = "run `gleaner init` on a new repo if these files are gone"
	}
	return []Check{c}
}
