package executor

import (
	"context"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
)

// Two egress jobs each get a bridge network of their own: the test can
// reach each job's server from the host, but a third egress job cannot
// reach it across networks, as it could on a shared bridge. All traffic is
// between this machine and the containers the test started.
func TestDockerEgressNetworkPerJob(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	var ips []string
	var nets []string
	var jobs []Job
	for i := 0; i < 2; i++ {
		spec := testSpec(t, "serve", "8080")
		spec.Egress = true
		j, err := d.Start(ctx, spec, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		cleanupJob(t, j)
		waitForLog(t, j, "listening")
		info, err := d.cli.ContainerInspect(ctx, j.(*dockerJob).id)
		if err != nil {
			t.Fatal(err)
		}
		name := networkName(spec.JobID)
		if string(info.HostConfig.NetworkMode) != name || len(info.NetworkSettings.Networks) != 1 || info.NetworkSettings.Networks[name] == nil {
			t.Fatalf("job %s: NetworkMode %s, networks %v; want only %s", spec.JobID, info.HostConfig.NetworkMode, keys(info.NetworkSettings.Networks), name)
		}
		n, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Driver != "bridge" || n.Labels[LabelJob] != spec.JobID || n.Labels[LabelManaged] != "1" || len(n.Containers) != 1 ||
			n.Options[bridgeICC] != "false" || n.Internal {
			t.Fatalf("network %s: driver %s labels %v options %v internal %v, %d containers", name, n.Driver, n.Labels, n.Options, n.Internal, len(n.Containers))
		}
		if bridge, err := d.cli.NetworkInspect(ctx, "bridge", network.InspectOptions{}); err == nil && n.Options[driverMTU] != bridge.Options[driverMTU] {
			t.Errorf("network MTU %q, the default bridge's %q", n.Options[driverMTU], bridge.Options[driverMTU])
		}
		ips = append(ips, info.NetworkSettings.Networks[name].IPAddress)
		nets = append(nets, name)
		jobs = append(jobs, j)
	}
	if nets[0] == nets[1] {
		t.Fatalf("both jobs on %s", nets[0])
	}

	// Both servers answer (so a failure below is the network's doing).
	for _, ip := range ips {
		if got := dialFromHost(t, ip+":8080"); got != "pong\n" {
			t.Fatalf("server at %s answered the host with %q", ip, got)
		}
	}
	// An egress job on a network of its own cannot reach either.
	for _, ip := range ips {
		spec := testSpec(t, "dial", ip+":8080")
		spec.Egress = true
		var r struct{ Reply, Err string }
		runProbe(t, d, spec, &r)
		t.Logf("another job dialing %s: reply %q, error %q", ip, r.Reply, r.Err)
		if r.Reply != "" || r.Err == "" {
			t.Fatalf("a job on another network reached the server at %s: %+v", ip, r)
		}
	}

	// Remove takes the network with the job.
	if err := jobs[0].Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.NetworkInspect(ctx, nets[0], network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("network %s after Remove: %v", nets[0], err)
	}
}

// dialFromHost connects from the test's own machine to a container it
// started and reads the reply.
func dialFromHost(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatalf("host cannot reach %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read from %s: %v", addr, err)
	}
	return string(b)
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// After a crash, Reconcile removes a job's network (and its volume and
// holder) with its container, a network whose container was never created,
// and leaves a kept job's network alone.
func TestDockerReconcileRemovesNetworks(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	kept, orphan := testSpec(t, "ignore"), testSpec(t, "ignore")
	kept.Egress, orphan.Egress, orphan.CheckpointPath = true, true, "/ckpt"
	for _, s := range []Spec{kept, orphan} {
		j, err := d.Start(ctx, s, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		cleanupJob(t, j)
	}
	// A provider that died between creating a network and the container.
	bare := testSpec(t)
	if _, err := d.jobNetwork(ctx, &bare); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cli.NetworkRemove(context.Background(), networkName(bare.JobID)) })

	if n := len(containersOf(t, d, orphan.JobID)); n != 2 {
		t.Fatalf("orphan has %d containers, want the job and its volume holder", n)
	}
	removed, err := d.Reconcile(ctx, func(id string) bool { return id != orphan.JobID && id != bare.JobID })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{orphan.JobID}) {
		t.Fatalf("removed %v, want just %s", removed, orphan.JobID)
	}
	for _, id := range []string{orphan.JobID, bare.JobID} {
		if _, err := d.cli.NetworkInspect(ctx, networkName(id), network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Errorf("network of %s survived Reconcile: %v", id, err)
		}
	}
	if n := len(containersOf(t, d, orphan.JobID)); n != 0 {
		t.Errorf("%d containers of the orphan survived", n)
	}
	if _, err := d.cli.VolumeInspect(ctx, "gleaner-ckpt-"+orphan.JobID); !cerrdefs.IsNotFound(err) {
		t.Errorf("orphan's checkpoint volume survived: %v", err)
	}
	if _, err := d.cli.NetworkInspect(ctx, networkName(kept.JobID), network.InspectOptions{}); err != nil {
		t.Errorf("kept job's network: %v", err)
	}
}
