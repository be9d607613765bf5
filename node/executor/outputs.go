package executor

import (
	"context"
	"fmt"
	"io"
	"path"
)

// Outputs.
//
// A job's results go to Spec.OutputPath, a writable directory that
// CopyOutputs reads out as a tar stream while the job runs and after it
// exits, until Remove (the provider ships it to the renter).
//
// Docker: the output path is a quota volume like the checkpoint path
// (volume.go): a `local` volume of type tmpfs of OutputMiB, created before
// the job's container and kept mounted by the job's holder, so that it
// survives the job's exit and an adoption (Adopt finds the holder and the
// volume by label and the path by the job's mount of the volume), and is
// gone with the holder at Remove. A job that writes more than OutputMiB
// gets ENOSPC; not a byte of its outputs reaches the daemon's disk. The
// root filesystem stays read-only: the volume is one more writable mount
// with a quota, and nothing else.
//
// Memory. A tmpfs's pages are charged to the memory cgroup of the process
// that writes them, so a job's outputs count against its memory limit for
// as long as they exist. The small quotas (checkpoint, /tmp, /dev/shm, 64
// MiB each by default) come out of MemoryMiB; the outputs, a GiB by
// default, cannot: a job of the lease's memory that filled its outputs
// would be OOM-killed long before ENOSPC, and its outputs' bound would be
// whatever memory its run left over rather than OutputMiB. So the
// container's limit is MemoryMiB + OutputMiB (Spec.memoryLimitMiB). The
// cost is that a job that writes fewer outputs may use the difference as
// working memory: the provider must count OutputMiB as memory the lease
// holds, as it does MemoryMiB.
//
// Process: the outputs are a directory of the job's work directory (the
// job finds it in EnvOutputs), without a quota, removed with the job.

const (
	// DefaultOutputMiB bounds OutputPath for a spec that leaves OutputMiB
	// zero: a GiB, room for a model's weights or a batch of results, and
	// memory the provider's host can lend on top of the job's own.
	DefaultOutputMiB = 1024
	// MaxOutputMiB bounds OutputMiB: 64 GiB of memory is what a large
	// provider could lend a job's results, and no more.
	MaxOutputMiB = 65536
)

// outputVolume names the job's output volume.
func outputVolume(jobID string) string { return "gleaner-out-" + jobID }

// outputMiB is the output volume's size; 0 for a spec without outputs.
func (s *Spec) outputMiB() int {
	if s.OutputPath == "" {
		return 0
	}
	return orDefault(s.OutputMiB, DefaultOutputMiB)
}

// memoryLimitMiB is the container's memory (and memory+swap) limit:
// MemoryMiB, plus the output volume's size, whose pages the job's cgroup
// is charged for (see "Memory" above).
func (s *Spec) memoryLimitMiB() int64 { return s.MemoryMiB + int64(s.outputMiB()) }

// validateOutputs is Spec.validate's part for OutputPath and OutputMiB.
// The output path is a mount of its own, so it may be neither equal to,
// nor above, nor below any other mount of the job's (the executor's and
// the runtime's reserved paths, the checkpoint, the inputs).
func (s *Spec) validateOutputs(bad func(string, ...any) error) error {
	if s.OutputMiB < 0 || s.OutputMiB > MaxOutputMiB {
		return bad("output quota %d MiB, must be 0..%d", s.OutputMiB, MaxOutputMiB)
	}
	o := s.OutputPath
	if o == "" {
		return nil
	}
	switch {
	case !path.IsAbs(o) || path.Clean(o) != o:
		return bad("output path %q must be an absolute, clean path", o)
	case o == "/":
		return bad("output path %q must not be /", o)
	}
	for _, r := range reservedTargets {
		if overlaps(o, r) {
			return bad("output path %q overlaps the reserved path %s", o, r)
		}
	}
	if s.CheckpointPath != "" {
		if c := path.Clean(s.CheckpointPath); overlaps(o, c) {
			return bad("output path %q overlaps the checkpoint path %s", o, c)
		}
	}
	for i, in := range s.Inputs {
		if overlaps(o, in.Target) {
			return bad("output path %q overlaps input %d (%q)", o, i, in.Target)
		}
	}
	return nil
}

// CopyOutputs implements Job. It reads the output volume through the
// job's container, as CopyCheckpoint does: the holder keeps the volume
// mounted, so its contents are there before the job begins and after it
// exits; asking for "<path>/." makes the names "./"-relative.
func (j *dockerJob) CopyOutputs(ctx context.Context) (io.ReadCloser, error) {
	if j.spec.OutputPath == "" {
		return nil, ErrNoOutputs
	}
	j.mu.Lock()
	removed := j.removed
	j.mu.Unlock()
	if removed {
		return nil, fmt.Errorf("executor: copy outputs of job %s: the job was removed", j.spec.JobID)
	}
	rc, _, err := j.d.cli.CopyFromContainer(ctx, j.id, j.spec.OutputPath+"/.")
	if err != nil {
		return nil, fmt.Errorf("executor: copy outputs of job %s: %w", j.spec.JobID, err)
	}
	return rc, nil
}
