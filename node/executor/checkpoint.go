package executor

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/volume"
)

// The checkpoint lives in a named volume, not a tmpfs: a tmpfs is gone the
// moment the container exits, and the checkpoint is wanted exactly then.
//
// A fresh volume's root is owned by root, which a job running as 65534
// without capabilities cannot write to, and the Engine API offers no chown
// (copying a tar onto a volume leaves its root's owner alone). What Docker
// does do is copy the owner of the mount point's directory in the image
// into an empty volume when a container using it is created. So the
// executor builds, once, a tiny local image FROM scratch whose /ckpt
// belongs to 65534, and creates (never starts) one container from it to
// hand each new checkpoint volume to the job's user. It needs no registry
// and no host path, so it works for a provider that is not root.
const (
	ownerImage  = "gleaner-checkpoint-owner:1"
	ownerTarget = "/ckpt"
)

// checkpointVolume creates the job's labelled checkpoint volume, owned by
// the user the job runs as.
func (d *Docker) checkpointVolume(ctx context.Context, s *Spec) (string, error) {
	name := "gleaner-ckpt-" + s.JobID
	if _, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: s.labels()}); err != nil {
		return "", fmt.Errorf("executor: create checkpoint volume for job %s: %w", s.JobID, err)
	}
	if s.RunAsRoot { // root already owns a fresh volume
		return name, nil
	}
	err := d.ensureOwnerImage(ctx)
	if err == nil {
		var c container.CreateResponse
		c, err = d.cli.ContainerCreate(ctx,
			&container.Config{Image: ownerImage, Cmd: []string{"/none"}, Labels: s.labels()},
			&container.HostConfig{Binds: []string{name + ":" + ownerTarget}, NetworkMode: "none"},
			nil, nil, "")
		if err == nil {
			err = d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	}
	if err != nil {
		_ = d.cli.VolumeRemove(context.WithoutCancel(ctx), name, true)
		return "", fmt.Errorf("executor: prepare checkpoint volume for job %s: %w", s.JobID, err)
	}
	return name, nil
}

// ensureOwnerImage builds ownerImage unless the engine has it.
func (d *Docker) ensureOwnerImage(ctx context.Context) error {
	d.ownerMu.Lock()
	defer d.ownerMu.Unlock()
	if d.ownerReady {
		return nil
	}
	if _, err := d.cli.ImageInspect(ctx, ownerImage); err == nil {
		d.ownerReady = true
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dockerfile := []byte("FROM scratch\nCOPY --chown=65534:65534 ckpt " + ownerTarget + "\n")
	_ = tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile)), ModTime: time.Unix(0, 0)})
	_, _ = tw.Write(dockerfile)
	_ = tw.WriteHeader(&tar.Header{Name: "ckpt/", Typeflag: tar.TypeDir, Mode: 0o700, ModTime: time.Unix(0, 0)})
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := d.cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		Tags: []string{ownerImage}, Remove: true, ForceRemove: true,
		Labels: map[string]string{LabelManaged: "1"},
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", ownerImage, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct{ Error string }
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("build %s: %w", ownerImage, err)
		}
		if m.Error != "" {
			return fmt.Errorf("build %s: %s", ownerImage, m.Error)
		}
	}
	d.ownerReady = true
	return nil
}
