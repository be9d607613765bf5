package testnet

import (
	"context"
	"fmt"
	"strings"
)

// The faults a test injects into a DockerNet: each acts on the engine, as
// an operator or a power cut would, never through the daemon's own API.

// Kill sends the daemon SIGKILL (kill -9): it is PID 1 of its container, so
// the container and every job process in it die at once, with no shutdown
// path run. The repo stays in the container's filesystem for Restart.
func (d *DockerNet) Kill(ctx context.Context, n *DockerNode) error {
	_, err := docker(ctx, "kill", "--signal", "KILL", n.Name)
	return err
}

// Stop stops the daemon cleanly (SIGTERM, as `systemctl stop` does),
// waiting up to graceSec for it to exit before the engine kills it.
func (d *DockerNet) Stop(ctx context.Context, n *DockerNode, graceSec int) error {
	_, err := docker(ctx, "stop", "--time", fmt.Sprint(graceSec), n.Name)
	return err
}

// Restart starts a killed or stopped daemon again on the same repo and
// waits for it to answer. Its address may change (the engine may hand out
// another IP), so n.Addr is read again.
func (d *DockerNet) Restart(ctx context.Context, n *DockerNode) error {
	if _, err := docker(ctx, "start", n.Name); err != nil {
		return err
	}
	return d.waitReady(ctx, n)
}

// Leftovers lists what the engine still holds of this DockerNet: its
// containers, networks and image (by its label) and the volumes its
// containers had mounted (noted by Close). Empty after Close, or
// something leaked.
func (d *DockerNet) Leftovers(ctx context.Context) ([]string, error) {
	type query struct {
		what string
		args []string
	}
	qs := []query{
		{"container", []string{"ps", "-a", "--filter", "label=" + d.label, "--format", "{{.Names}}"}},
		{"network", []string{"network", "ls", "--filter", "label=" + d.label, "--format", "{{.Name}}"}},
		{"image", []string{"image", "ls", "--filter", "label=" + d.label, "--format", "{{.Repository}}:{{.Tag}}"}},
	}
	d.mu.Lock()
	for _, v := range d.volumes {
		qs = append(qs, query{"volume", []string{"volume", "ls", "--filter", "name=^" + v + "$", "--format", "{{.Name}}"}})
	}
	d.mu.Unlock()
	var left []string
	for _, q := range qs {
		out, err := docker(ctx, q.args...)
		if err != nil {
			return left, err
		}
		for _, name := range strings.Fields(string(out)) {
			left = append(left, q.what+" "+name)
		}
	}
	return left, nil
}

// mountedVolumes are the volumes the named containers mount.
func mountedVolumes(ctx context.Context, names []string) []string {
	out, err := docker(ctx, append([]string{"inspect", "-f", "{{range .Mounts}}{{if .Name}}{{.Name}} {{end}}{{end}}"}, names...)...)
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}
