package executor

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// Netnser is a job whose container has a network namespace of its own,
// where the daemon can make sockets its processes reach on their
// loopback (a gang member's forwarded ports, node/gangnet).
type Netnser interface {
	// Netns is the path of the running container's network namespace.
	Netns(ctx context.Context) (string, error)
}

var _ Netnser = (*dockerJob)(nil)

// Netns implements Netnser. The container's PID is the engine's, so it
// names this daemon's view of the process only when both see the same
// processes (not so for a daemon in a container of its own, with the
// engine's socket): the process's cgroup must name the container, or
// nothing is entered.
func (j *dockerJob) Netns(ctx context.Context) (string, error) {
	info, err := j.d.cli.ContainerInspect(ctx, j.id)
	if err != nil {
		return "", fmt.Errorf("job %s: %w", j.spec.JobID, err)
	}
	if info.State == nil || !info.State.Running || info.State.Pid <= 0 {
		return "", fmt.Errorf("job %s: its container is not running", j.spec.JobID)
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", info.State.Pid))
	if err != nil || !strings.Contains(string(cg), j.id) {
		return "", fmt.Errorf("job %s: this daemon does not see the container's processes (is it in a container of its own?)", j.spec.JobID)
	}
	return fmt.Sprintf("/proc/%d/ns/net", info.State.Pid), nil
}
