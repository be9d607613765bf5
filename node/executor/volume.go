package executor

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
)

// Quotas on what a job can write.
//
// The job's root filesystem is read-only, so it can write only where the
// executor mounts something writable: /tmp, /dev/shm, the checkpoint path
// and the output path (anything returned by Spec.quotaVolumes). Every one of them is a tmpfs with a size, so a job that writes too much
// gets ENOSPC and the provider's disk never sees a byte of it. Pages of a
// tmpfs are charged to the memory cgroup of the process that writes them,
// so what a job keeps there also counts against its memory limit.
//
// Why a tmpfs rather than a disk quota. The daemon's disk (overlay2 or
// fuse-overlayfs on ext4, as here and in CI) has no per-volume quota: the
// `local` driver's size option needs XFS mounted with project quotas,
// --storage-opt size works only with some storage drivers, and a
// loop-mounted ext4 image would need losetup on the daemon's host (root, a
// host path, a local daemon: the local driver calls mount(2), which has no
// "loop" option). A tmpfs's size is enforced by the kernel wherever Linux
// runs, for a provider in the docker group as much as for root.
//
// Why a volume, and why a holder. A tmpfs mounted into the job's container
// (HostConfig.Tmpfs, as for /tmp) exists only while the container runs: a
// checkpoint restored into the created container would be hidden under it,
// and the checkpoint wanted after the job exits would be gone with it. A
// `local` volume of type tmpfs exists before the container does, but the
// daemon mounts it only while some container uses it and unmounts it, its
// contents lost, when the last user stops, which includes the end of the
// CopyToContainer that restores a checkpoint. So a job with such volumes
// also gets a holder: a container that keeps them mounted from before the
// restore until Remove, running a program that only blocks (holder.go) from
// a local image FROM scratch that the executor builds once.
const (
	holderImage = "gleaner-volume-holder:1"
	// LabelRole marks the executor's helper containers (the holder), which
	// carry the job's labels too so that Reconcile sweeps them with it.
	LabelRole  = "net.gleaner.role"
	roleHolder = "holder"
)

// Default quotas for a Spec that leaves them zero.
const (
	// DefaultCheckpointMiB bounds the checkpoint path. The provider ships
	// at most 8 MiB of checkpoint back to the renter, so anything bigger
	// is useless for resuming elsewhere; 64 MiB leaves room for a job that
	// writes its next checkpoint before deleting the last one, plus
	// temporary files, and is small next to the 2 GiB per GPU the provider
	// grants at least.
	DefaultCheckpointMiB = 64
	// DefaultScratchMiB bounds /tmp.
	DefaultScratchMiB = 64
	// DefaultShmMiB bounds /dev/shm: Docker's own default, set explicitly so
	// that it does not depend on the daemon's default-shm-size.
	DefaultShmMiB = 64
)

// quotaVolume is one writable volume of a job, of at most mib MiB.
type quotaVolume struct {
	name   string // the Docker volume
	target string // where the job sees it
	mib    int
}

// quotaVolumes are the job's volumes that outlive its process, each with
// its quota and kept by the holder: the checkpoint and the outputs
// (outputs.go).
func (s *Spec) quotaVolumes() []quotaVolume {
	var vs []quotaVolume
	if s.CheckpointPath != "" {
		vs = append(vs, quotaVolume{name: "gleaner-ckpt-" + s.JobID, target: s.CheckpointPath, mib: s.checkpointMiB()})
	}
	if s.OutputPath != "" {
		vs = append(vs, quotaVolume{name: outputVolume(s.JobID), target: s.OutputPath, mib: s.outputMiB()})
	}
	return vs
}

// inodes bounds a tmpfs's files too, one per 4 KiB of its size: inodes are
// kernel memory the size does not count, so without a limit a job could
// create empty files until the host ran out.
func inodes(mib int) int { return mib * 256 }

// volumeOptions is the mount data of a quota volume's tmpfs, owned by the
// user the job runs as (root owns it only for a job that runs as root).
func (s *Spec) volumeOptions(mib int) string {
	owner := 65534
	if s.RunAsRoot {
		owner = 0
	}
	return fmt.Sprintf("size=%dm,nr_inodes=%d,uid=%d,gid=%d,mode=0700,nosuid,nodev", mib, inodes(mib), owner, owner)
}

// holdVolumes creates the job's quota volumes and the holder that keeps
// them mounted, recording each in rs as it exists so that a failure halfway
// can be cleaned up by rs.remove.
func (d *Docker) holdVolumes(ctx context.Context, s *Spec, vols []quotaVolume, rs *jobResources) error {
	hc := &container.HostConfig{
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		NetworkMode:    "none",
		LogConfig:      container.LogConfig{Type: "none"},
		Resources:      holderResources(),
	}
	for i, v := range vols {
		o := s.volumeOptions(v.mib)
		created, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{
			Name: v.name, Driver: "local", Labels: s.labels(d.owner),
			DriverOpts: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": o},
		})
		if err != nil {
			return fmt.Errorf("create volume %s: %w", v.name, err)
		}
		rs.volumes = append(rs.volumes, v.name)
		// Creating a volume that exists returns the old one, whatever it
		// was made of: never hand a job a volume without its quota.
		if created.Driver != "local" || created.Options["type"] != "tmpfs" || created.Options["o"] != o {
			return fmt.Errorf("volume %s exists already with other options (%s %v)", v.name, created.Driver, created.Options)
		}
		hc.Mounts = append(hc.Mounts, mount.Mount{
			Type: mount.TypeVolume, Source: v.name, Target: "/vol/" + strconv.Itoa(i),
			VolumeOptions: &mount.VolumeOptions{NoCopy: true},
		})
	}
	if err := d.ensureHolderImage(ctx); err != nil {
		return err
	}
	labels := s.labels(d.owner)
	labels[LabelRole] = roleHolder
	c, err := d.cli.ContainerCreate(ctx,
		&container.Config{Image: holderImage, User: "65534:65534", Labels: labels},
		hc, nil, nil, "gleaner-hold-"+s.JobID)
	if err != nil {
		return fmt.Errorf("create volume holder: %w", err)
	}
	rs.holder = c.ID
	if err := d.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start volume holder: %w", err)
	}
	return nil
}

// holderResources: the holder's program needs a page of memory and no CPU,
// but runc sets the container up from inside its cgroups, so it gets some
// room, and the lowest CPU weight rather than a quota that would slow that.
func holderResources() container.Resources {
	pids := int64(32)
	return container.Resources{Memory: 32 << 20, MemorySwap: 32 << 20, PidsLimit: &pids, CPUShares: 2}
}

// ensureHolderImage builds holderImage, for the engine's architecture,
// unless the engine has it.
func (d *Docker) ensureHolderImage(ctx context.Context) error {
	d.holderMu.Lock()
	defer d.holderMu.Unlock()
	if d.holderReady {
		return nil
	}
	if _, err := d.cli.ImageInspect(ctx, holderImage); err == nil {
		d.holderReady = true
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return err
	}
	v, err := d.cli.ServerVersion(ctx)
	if err != nil {
		return fmt.Errorf("build %s: %w", holderImage, err)
	}
	prog, err := holderProgram(v.Arch)
	if err != nil {
		return fmt.Errorf("build %s: %w", holderImage, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dockerfile := []byte("FROM scratch\nCOPY hold /hold\nENTRYPOINT [\"/hold\"]\n")
	_ = tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: time.Unix(0, 0)})
	_, _ = tw.Write(dockerfile)
	_ = tw.WriteHeader(&tar.Header{Name: "hold", Mode: 0o755, Size: int64(len(prog)), ModTime: time.Unix(0, 0)})
	_, _ = tw.Write(prog)
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := d.cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		Tags: []string{holderImage}, Remove: true, ForceRemove: true,
		Labels: map[string]string{LabelManaged: "1"},
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", holderImage, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct{ Error string }
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("build %s: %w", holderImage, err)
		}
		if m.Error != "" {
			return fmt.Errorf("build %s: %s", holderImage, m.Error)
		}
	}
	d.holderReady = true
	return nil
}

// jobResources is what Start creates for a job besides its container.
type jobResources struct {
	network string   // the job's own network's ID, or ""
	holder  string   // the volume holder's container ID, or ""
	filler  string   // the input filler's container ID while it exists, or ""
	volumes []string // quota and input volumes, by name
}

// remove deletes rs after the job's container is gone: the holder first
// (the daemon unmounts the tmpfs volumes when it stops, freeing their
// memory) and the input filler if a failed fill left it, then the volumes, then the network, which Docker refuses to
// remove while a container is attached. It tries everything and is
// idempotent.
func (d *Docker) removeResources(ctx context.Context, rs *jobResources) error {
	var errs []error
	if rs.holder != "" {
		err := d.cli.ContainerRemove(ctx, rs.holder, container.RemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume holder: %w", err))
		}
	}
	if rs.filler != "" {
		err := d.cli.ContainerRemove(ctx, rs.filler, container.RemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove input filler: %w", err))
		}
	}
	for _, v := range rs.volumes {
		if err := d.cli.VolumeRemove(ctx, v, true); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v, err))
		}
	}
	if rs.network != "" {
		if err := d.cli.NetworkRemove(ctx, rs.network); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network: %w", err))
		}
	}
	return errors.Join(errs...)
}
