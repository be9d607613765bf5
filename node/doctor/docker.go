package doctor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/gleaner-net/gleaner/node/executor"
)

// minDockerAPI is the oldest Engine API the executor works with: it asks
// for GPUs with DeviceRequests (API 1.40, Docker 19.03, the engine's
// `--gpus`), and everything else it uses is older.
const (
	minDockerAPI     = "1.40"
	minDockerRelease = "19.03"
)

// dockerVersion is what doctor reads of the engine.
type dockerVersion struct {
	Host, Version, APIVersion string
}

// dockerProbe is the slice of the Docker engine that doctor uses, in plain
// types, so that the checks are tested with a fake engine.
type dockerProbe interface {
	version(ctx context.Context) (dockerVersion, error)
	// info is `docker info`: the runtimes and CDI devices the GPU
	// checks look for (runtimeCheck).
	info(ctx context.Context) (system.Info, error)
	hasImage(ctx context.Context, ref string) (bool, error)
	// runGPU runs `nvidia-smi -L` in ref and returns its output: with
	// uuids, on exactly those GPUs, asked for as the executor asks for a
	// job's (executor.GPUContainer); with none, on every GPU (--gpus all),
	// which only doctor's whole-host check does.
	runGPU(ctx context.Context, ref string, uuids []string) (string, error)
	Close() error
}

// engine is dockerProbe over Docker's Go client, connected as
// executor.NewDocker connects (the environment, API version negotiated).
type engine struct{ cli *client.Client }

func newDockerProbe() (*engine, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	return &engine{cli}, nil
}

func (e *engine) Close() error { return e.cli.Close() }

func (e *engine) version(ctx context.Context) (dockerVersion, error) {
	v, err := e.cli.ServerVersion(ctx)
	if err != nil {
		return dockerVersion{Host: e.cli.DaemonHost()}, err
	}
	return dockerVersion{Host: e.cli.DaemonHost(), Version: v.Version, APIVersion: v.APIVersion}, nil
}

func (e *engine) info(ctx context.Context) (system.Info, error) { return e.cli.Info(ctx) }

func (e *engine) hasImage(ctx context.Context, ref string) (bool, error) {
	_, err := e.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (e *engine) runGPU(ctx context.Context, ref string, uuids []string) (string, error) {
	reqs, env := executor.GPUContainer(uuids)
	if len(uuids) == 0 {
		reqs, env = []container.DeviceRequest{{Driver: "nvidia", Count: -1, Capabilities: [][]string{{"gpu"}}}}, nil
	}
	c, err := e.cli.ContainerCreate(ctx,
		&container.Config{Image: ref, Cmd: []string{"nvidia-smi", "-L"}, Env: env, Labels: map[string]string{"net.gleaner.doctor": "1"}},
		&container.HostConfig{
			NetworkMode: "none",
			Resources:   container.Resources{DeviceRequests: reqs},
		}, nil, nil, "")
	if err != nil {
		return "", err
	}
	// Removed on every path, with a context of its own: ctx may be the
	// one that ran out.
	defer func() {
		_ = e.cli.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
	}()
	if err := e.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return "", err
	}
	waitC, errC := e.cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	var code int64
	select {
	case w := <-waitC:
		code = w.StatusCode
	case err := <-errC:
		return "", err
	}
	logs, err := e.cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "", err
	}
	defer logs.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(logs, 64<<10))
	if code != 0 {
		return "", fmt.Errorf("nvidia-smi exited %d: %s", code, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

func dockerUnreachable(err error) Check {
	return Check{Name: "docker", Status: StatusFail,
		Detail: "Docker engine unreachable: " + err.Error(),
		Fix:    "start Docker (sudo systemctl start docker) and let this user use it (sudo usermod -aG docker $USER, then log in again); DOCKER_HOST names another engine"}
}

// dockerChecks checks the engine answers and is new enough. info is nil
// when it does not answer, and the GPU checks then skip Docker's part.
func dockerChecks(ctx context.Context, d dockerProbe) ([]Check, *dockerVersion) {
	v, err := d.version(ctx)
	if err != nil {
		return []Check{dockerUnreachable(fmt.Errorf("at %s: %v", v.Host, err))}, nil
	}
	c := Check{Name: "docker", Status: StatusPass,
		Detail: fmt.Sprintf("Docker %s (API %s) at %s", v.Version, v.APIVersion, v.Host)}
	if v.APIVersion == "" || versions.LessThan(v.APIVersion, minDockerAPI) {
		c.Status = StatusFail
		c.Detail += fmt.Sprintf("; the executor needs API %s (Docker %s) or newer for GPU device requests", minDockerAPI, minDockerRelease)
		c.Fix = "upgrade Docker: https://docs.docker.com/engine/install/"
	}
	return []Check{c}, &v
}
