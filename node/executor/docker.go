package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
)

var _ Executor = (*Docker)(nil)

// Docker runs jobs as containers through the Docker Engine API.
type Docker struct {
	cli     *client.Client
	logSize int
	owner   Owner // set before the first Start (SetOwner)
	// serviceGuard runs before each service job's network is made
	// (SetServiceGuard): the node's check that the firewall rule of
	// service_firewall.go is still there.
	serviceGuard func(context.Context)

	staleMu sync.Mutex      // guards stale
	stale   map[string]bool // job IDs of the owner's leftovers Reconcile kept

	holderMu    sync.Mutex // guards holderReady; held while building the image
	holderReady bool       // the volume holder image exists

	privMu  sync.Mutex      // guards private
	private map[string]bool // IDs of images this Docker pulled with RegistryAuth (registryauth.go)

	netMu    sync.Mutex // guards mtu and mtuKnown
	mtu      string     // the default bridge's MTU option, "" for Docker's default
	mtuKnown bool
}

// NewDocker connects to the engine named by the environment (DOCKER_HOST,
// ...) and checks that it answers, so that a node without Docker learns it
// at startup rather than at its first lease.
func NewDocker(ctx context.Context) (*Docker, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w at %s (is the Docker daemon running and is this user allowed to use it?): %v", ErrNoDocker, cli.DaemonHost(), err)
	}
	return &Docker{cli: cli, logSize: DefaultLogBytes, owner: Owner{Instance: processInstance()}}, nil
}

// processInstance is an instance ID of this process alone: what a Docker
// executor owns until SetOwner names its repo's.
func processInstance() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "p" + hex.EncodeToString(b)
}

// SetOwner names whose jobs this executor creates, before its first Start
// or Reconcile: the node's peer ID and its repo's instance ID. Until then
// (and with an empty Instance) the executor owns only what it creates
// itself, with an instance ID of this process.
func (d *Docker) SetOwner(o Owner) {
	if o.Instance == "" {
		o.Instance = d.owner.Instance
	}
	d.owner = o
}

// SetServiceGuard sets what runs before each service job starts; like
// SetOwner, before the first Start. The node re-ensures the service
// firewall rule there, because a firewall reload (ufw, firewalld) that
// flushes INPUT since the daemon's start would otherwise leave the next
// service job able to reach the host.
func (d *Docker) SetServiceGuard(f func(context.Context)) { d.serviceGuard = f }

// Owner is whose jobs this executor creates.
func (d *Docker) Owner() Owner { return d.owner }

// Close releases the client; running jobs are not affected.
func (d *Docker) Close() error { return d.cli.Close() }

// Kind implements Executor.
func (d *Docker) Kind() string { return "docker" }

// Unsafe implements Executor: containers are isolated.
func (d *Docker) Unsafe() bool { return false }

// Start implements Executor.
func (d *Docker) Start(ctx context.Context, spec Spec, hooks Hooks) (Job, error) {
	j, err := d.create(ctx, spec, hooks)
	if err != nil {
		return nil, err
	}
	if err := j.Begin(ctx); err != nil {
		return nil, err
	}
	return j, nil
}

// Create implements Creator: everything Start does but starting the
// container, so that a job reserved for a later window begins at its
// window in the time a container takes to start.
func (d *Docker) Create(ctx context.Context, spec Spec, hooks Hooks) (Created, error) {
	return d.create(ctx, spec, hooks)
}

// Begin implements Created.
func (j *dockerJob) Begin(ctx context.Context) error {
	if err := j.start(ctx); err != nil {
		// Nothing of a job that never ran may stay behind.
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = j.Remove(rmCtx)
		return fmt.Errorf("executor: start job %s: %w", j.spec.JobID, err)
	}
	return nil
}

func (d *Docker) create(ctx context.Context, spec Spec, hooks Hooks) (*dockerJob, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if err := d.replaceStale(ctx, spec.JobID); err != nil {
		return nil, err
	}
	var res Result
	pulled, took, err := d.ensureImage(ctx, spec.Image, spec.RegistryAuth, hooks.OnPull)
	if err != nil {
		return nil, err
	}
	res.Pulled, res.PullDuration = pulled, took

	// Everything but the container, in the order Remove undoes it.
	var rs jobResources
	cleanup := func() {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = d.removeResources(rmCtx, &rs)
	}
	if spec.Egress {
		if rs.network, err = d.jobNetwork(ctx, &spec); err != nil {
			return nil, fmt.Errorf("executor: job %s: %w", spec.JobID, err)
		}
	}
	if spec.ServicePort > 0 {
		if d.serviceGuard != nil {
			d.serviceGuard(ctx)
		}
		if rs.network, err = d.serviceNetwork(ctx, &spec); err != nil {
			return nil, fmt.Errorf("executor: job %s: %w", spec.JobID, err)
		}
	}
	// Inputs first: filling them may take long, and a failure then costs
	// no holder. The filler is gone before the job's container exists.
	if len(spec.Inputs) > 0 {
		if err := d.fillInputs(ctx, &spec, &rs); err != nil {
			cleanup()
			return nil, fmt.Errorf("executor: inputs of job %s: %w", spec.JobID, err)
		}
	}
	if vols := spec.quotaVolumes(); len(vols) > 0 {
		if err := d.holdVolumes(ctx, &spec, vols, &rs); err != nil {
			cleanup()
			return nil, fmt.Errorf("executor: volumes of job %s: %w", spec.JobID, err)
		}
	}
	cfg, hc := containerConfig(&spec)
	cfg.Labels = spec.labels(d.owner)
	serviceContainer(&spec, cfg, hc)
	created, err := d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, containerName(spec.JobID))
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("executor: create container for job %s: %w", spec.JobID, err)
	}
	j := newDockerJob(d, created.ID, rs, spec, res)
	if len(spec.Restore) > 0 && spec.CheckpointPath != "" {
		// Into the volume of a created, not yet started container, which
		// the holder keeps mounted; a restore larger than the quota fails
		// here with ENOSPC. Docker makes copied files root's (keeping the
		// tar's owners needs a passwd file, which a FROM scratch image
		// lacks), so the entries are opened up for the job's user instead:
		// the volume is this job's alone, so nobody else can use the
		// permissions.
		var open []byte
		if open, err = openPermissions(spec.Restore); err == nil {
			err = d.cli.CopyToContainer(ctx, created.ID, spec.CheckpointPath, bytes.NewReader(open),
				container.CopyToContainerOptions{})
		}
		if err != nil {
			rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = j.Remove(rmCtx)
			return nil, fmt.Errorf("executor: restore checkpoint of job %s: %w", spec.JobID, err)
		}
	}
	return j, nil
}

func containerName(jobID string) string { return "gleaner-job-" + jobID }

// containerConfig is the whole isolation policy in one place. The job's
// network and quota volumes must exist (Start creates them first).
func containerConfig(s *Spec) (*container.Config, *container.HostConfig) {
	user := "65534:65534" // nobody: a job that escapes its namespaces owns nothing
	if s.RunAsRoot {
		user = "0:0"
	}
	cfg := &container.Config{
		Image:        s.Image,
		Cmd:          s.Command,
		Env:          append(s.environ(s.CheckpointPath, s.inputTargets(), s.OutputPath), s.gpuEnv()...),
		User:         user,
		AttachStdout: true,
		AttachStderr: true,
	}
	pids := s.Pids
	init := true // tini: forwards SIGTERM to the job and reaps its zombies
	hc := &container.HostConfig{
		Privileged:     false,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Init:           &init,
		// Logs are read from the attach stream into a bounded ring; the
		// daemon keeps no copy on disk, so nothing of the renter's output
		// outlives the job.
		LogConfig: container.LogConfig{Type: "none"},
		// Every writable mount has a quota (volume.go): /tmp and /dev/shm
		// are tmpfs mounts of their own, the checkpoint and the outputs
		// held tmpfs volumes.
		Tmpfs: map[string]string{
			"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%dm,nr_inodes=%d,mode=1777", s.scratchMiB(), inodes(s.scratchMiB())),
		},
		ShmSize:     int64(s.shmMiB()) << 20,
		IpcMode:     "private", // its own /dev/shm, which no other container can join
		NetworkMode: "none",
		Resources: container.Resources{
			// MemoryMiB, plus OutputMiB for the output volume's pages,
			// which are charged to the job (outputs.go).
			Memory:     s.memoryLimitMiB() << 20,
			MemorySwap: s.memoryLimitMiB() << 20, // equal to Memory: no swap on top
			NanoCPUs:   int64(s.CPUs * 1e9),
			PidsLimit:  &pids,
		},
	}
	if s.Egress {
		hc.NetworkMode = container.NetworkMode(networkName(s.JobID))
	}
	// Exactly the leased GPUs, by UUID, and nothing for simulated ones
	// (gpus.go says what else could widen it).
	hc.DeviceRequests = s.gpuDeviceRequests()
	for _, v := range s.quotaVolumes() {
		hc.Mounts = append(hc.Mounts, mount.Mount{
			Type:          mount.TypeVolume,
			Source:        v.name,
			Target:        v.target,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true},
		})
	}
	// Inputs are read-only: the job's writes still go only where a quota is.
	hc.Mounts = append(hc.Mounts, s.inputMounts()...)
	return cfg, hc
}

// ensureImage pulls ref unless the engine already has it. With auth it
// always pulls, and without it pulls again an image this Docker pulled
// with credentials: see RegistryAuth for why.
func (d *Docker) ensureImage(ctx context.Context, ref string, auth *RegistryAuth, onPull func(PullProgress)) (pulled bool, took time.Duration, err error) {
	if auth == nil {
		if img, err := d.cli.ImageInspect(ctx, ref); err == nil {
			if !d.pulledPrivately(img.ID) {
				return false, 0, nil
			}
		} else if !cerrdefs.IsNotFound(err) {
			return false, 0, fmt.Errorf("executor: inspect image %s: %w", ref, err)
		}
	}
	var opts image.PullOptions
	if auth != nil {
		if opts.RegistryAuth, err = encodeRegistryAuth(auth, ref); err != nil {
			return false, 0, fmt.Errorf("executor: pull %s: registry_auth: %w", ref, ErrBadSpec)
		}
	}
	t0 := time.Now()
	rc, err := d.cli.ImagePull(ctx, ref, opts)
	if err != nil {
		return false, 0, pullError(ref, auth, opts.RegistryAuth, err.Error(), err)
	}
	defer rc.Close()
	// The pull runs as long as the stream is read; errors arrive in it.
	dec := json.NewDecoder(rc)
	for {
		var m struct {
			ID             string `json:"id"`
			Status         string `json:"status"`
			Error          string `json:"error"`
			ProgressDetail struct {
				Current int64 `json:"current"`
				Total   int64 `json:"total"`
			} `json:"progressDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return false, 0, pullError(ref, auth, opts.RegistryAuth, err.Error(), err)
		}
		if m.Error != "" {
			return false, 0, pullError(ref, auth, opts.RegistryAuth, m.Error, nil)
		}
		if onPull != nil {
			onPull(PullProgress{Image: ref, Layer: m.ID, Status: m.Status, Current: m.ProgressDetail.Current, Total: m.ProgressDetail.Total})
		}
	}
	if auth != nil {
		img, err := d.cli.ImageInspect(ctx, ref)
		if err != nil {
			return false, 0, fmt.Errorf("executor: inspect image %s after pull: %w", ref, err)
		}
		d.markPrivate(img.ID)
	}
	return true, time.Since(t0), nil
}

// Reconcile implements Executor; see ReconcileReport.
func (d *Docker) Reconcile(ctx context.Context, keep func(jobID string) bool) ([]string, error) {
	r, err := d.ReconcileReport(ctx, keep)
	return r.Removed, err
}

// Reconciled is what ReconcileReport found on the engine.
type Reconciled struct {
	Removed []string // the owner's jobs keep rejected: removed
	Kept    []string // the owner's jobs keep held: left as they are
	// Others are jobs of the owner's peer ID that carry another instance
	// ID: a copy of the node's repo runs (or ran) on this engine. They are
	// never touched.
	Others []OtherJob
}

// OtherJob is a job another instance of the owner's identity created.
type OtherJob struct {
	JobID, Lease, Instance string
}

// ReconcileReport removes what an earlier run of the owner left behind.
// It finds leftovers by label only, and counts as its owner's only what
// carries the owner's instance ID, so that the owner's own containers,
// other nodes' jobs and those of another process with the same identity
// are never touched: the jobs' containers and their volume holders first,
// then volumes and networks whose container went away with a provider
// that died between the removals. Of the owner's jobs it keeps those keep
// holds (leases still to run); a later Start or Create of such a job
// replaces what was kept.
func (d *Docker) ReconcileReport(ctx context.Context, keep func(jobID string) bool) (Reconciled, error) {
	var r Reconciled
	others := map[string]bool{}
	err := d.sweep(ctx, filters.NewArgs(), func(labels map[string]string, owned bool) bool {
		job := labels[LabelJob]
		switch {
		case owned && !keep(job):
			return false
		case owned:
			if !slices.Contains(r.Kept, job) {
				r.Kept = append(r.Kept, job)
			}
		case d.owner.Node != "" && labels[LabelNode] == d.owner.Node && !others[job]:
			others[job] = true
			r.Others = append(r.Others, OtherJob{JobID: job, Lease: labels[LabelLease], Instance: labels[LabelInstance]})
		}
		return true
	}, &r.Removed)
	d.staleMu.Lock()
	if d.stale == nil {
		d.stale = map[string]bool{}
	}
	for _, job := range r.Kept {
		d.stale[job] = true
	}
	d.staleMu.Unlock()
	return r, err
}

// replaceStale removes what Reconcile kept of an earlier run's jobID
// before the job is created again: it would hold the names the new
// containers, volume and network need.
func (d *Docker) replaceStale(ctx context.Context, jobID string) error {
	d.staleMu.Lock()
	stale := d.stale[jobID]
	delete(d.stale, jobID)
	d.staleMu.Unlock()
	if !stale {
		return nil
	}
	var removed []string
	err := d.sweep(ctx, filters.NewArgs(filters.Arg("label", LabelJob+"="+jobID)),
		func(labels map[string]string, owned bool) bool { return !owned || labels[LabelJob] != jobID }, &removed)
	if err != nil {
		return fmt.Errorf("executor: job %s: remove what an earlier run left of it: %w", jobID, err)
	}
	return nil
}

// sweep removes the managed containers, then volumes, then networks
// matching filter that are the owner's (they carry its instance ID) and
// that keep does not hold; keep sees every one's labels, and whether it
// is the owner's. What is not the owner's is never removed, whatever keep
// says. removed collects the IDs of the jobs whose containers went.
func (d *Docker) sweep(ctx context.Context, filter filters.Args, keep func(labels map[string]string, owned bool) bool, removed *[]string) error {
	filter.Add("label", LabelManaged+"=1")
	drop := func(labels map[string]string) bool {
		owned := d.owner.Instance != "" && labels[LabelInstance] == d.owner.Instance
		return !keep(labels, owned) && owned
	}
	list, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filter})
	if err != nil {
		return fmt.Errorf("executor: list containers: %w", err)
	}
	var errs []error
	for _, c := range list {
		if !drop(c.Labels) {
			continue
		}
		job := c.Labels[LabelJob]
		err := d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container of job %s: %w", job, err))
			continue
		}
		if !slices.Contains(*removed, job) { // a job and its holder are one job
			*removed = append(*removed, job)
		}
	}
	vols, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: filter})
	if err != nil {
		errs = append(errs, fmt.Errorf("list volumes: %w", err))
	} else {
		for _, v := range vols.Volumes {
			if !drop(v.Labels) {
				continue
			}
			if err := d.cli.VolumeRemove(ctx, v.Name, true); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
			}
		}
	}
	nets, err := d.cli.NetworkList(ctx, network.ListOptions{Filters: filter})
	if err != nil {
		errs = append(errs, fmt.Errorf("list networks: %w", err))
	} else {
		for _, n := range nets {
			if !drop(n.Labels) {
				continue
			}
			if err := d.cli.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("executor: reconcile: %w", errors.Join(errs...))
	}
	return nil
}
