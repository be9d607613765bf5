package executor

import (
	"context"
	"os"
	"strings"
)

// Free disk where a job's inputs go (issue 34): a provider refuses a job
// whose input volumes would not fit its disk, less the reserve its owner
// keeps free, before it writes any.

// InputSpacer is an executor that can tell how much may still be written
// where its input volumes go.
type InputSpacer interface {
	// InputSpace is that, in bytes; ok is false where this node cannot
	// tell (a Docker engine on another machine, or in a VM).
	InputSpace(ctx context.Context) (free int64, ok bool, err error)
}

var _ InputSpacer = (*Docker)(nil)

// InputSpace is the free space of the filesystem of the engine's root
// directory (where `local` volumes live) when the engine runs on this
// machine, as far as this node can see it.
func (d *Docker) InputSpace(ctx context.Context) (int64, bool, error) {
	if !strings.HasPrefix(d.cli.DaemonHost(), "unix://") {
		return 0, false, nil // an engine over TCP or SSH: its disk is not this machine's
	}
	info, err := d.cli.Info(ctx)
	if err != nil {
		return 0, false, err
	}
	root := info.DockerRootDir
	if root == "" {
		return 0, false, nil
	}
	if _, err := os.Stat(root); err != nil {
		return 0, false, nil // Docker Desktop: the root is inside its VM
	}
	free, err := DiskFree(root)
	if err != nil {
		return 0, false, err
	}
	return free, true, nil
}
