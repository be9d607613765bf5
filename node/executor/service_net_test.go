package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
)

func TestServiceSpecValidate(t *testing.T) {
	for _, c := range []struct {
		port   int
		egress bool
		ok     bool
	}{{8000, false, true}, {0, true, true}, {8000, true, false}, {-1, false, false}, {65536, false, false}} {
		s := testSpec(t)
		s.ServicePort, s.Egress = c.port, c.egress
		if err := s.validate(); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadSpec)) {
			t.Errorf("port %d egress %v: %v", c.port, c.egress, err)
		}
	}
}

// startService starts the probe serving "pong" on 8080 as a service job.
func startService(t *testing.T, d *Docker) (Job, netip.AddrPort) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := testSpec(t, "serve", "8080")
	spec.ServicePort = 8080
	j, err := d.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	waitForLog(t, j, "listening")
	addr, err := j.(Service).ServiceAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return j, addr
}

// A service job is on an internal network of its own, which the host (the
// daemon) reaches and nothing else does: not a container on the default
// bridge, not another job's; and the job reaches neither another
// container's listener nor one on the host's own non-bridge address.
//
// As root the service firewall is ensured first, as a daemon does: Docker's
// isolation alone has a gap each time any network is created (see
// service_firewall.go), and CI, which runs other packages' containers
// alongside, once hit it. Without root this tests Docker's isolation
// alone, which can fail in that gap.
func TestDockerServiceNetwork(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	if os.Geteuid() == 0 {
		leaveFirewallAsFound(t)
		if r := EnsureServiceFirewall(ctx); r[0].State != FirewallPresent && r[0].State != FirewallAdded {
			t.Fatalf("as root, the service firewall: %+v", r[0])
		}
	} else {
		t.Log("not root: the service firewall is not ensured, so this tests Docker's isolation alone")
	}
	j, addr := startService(t, d)
	if got := dialFromHost(t, addr.String()); got != "pong\n" {
		t.Fatalf("service at %s answered the host with %q", addr, got)
	}
	name := serviceNetworkName(j.ID())
	n, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Internal || n.Options[bridgeICC] != "false" || n.Labels[LabelJob] != j.ID() || n.Labels[LabelInstance] != d.owner.Instance ||
		n.Options[bridgeName] != serviceBridge(d.owner.Instance, j.ID()) || len(n.Containers) != 1 {
		t.Fatalf("network %s: internal %v options %v labels %v, %d containers", name, n.Internal, n.Options, n.Labels, len(n.Containers))
	}

	// Strangers: a plain container on Docker's default bridge, and an
	// egress job on a network of its own.
	if r := dialOnDefaultBridge(t, d, addr.String()); r.Reply != "" || r.Err == "" {
		t.Fatalf("a container on the default bridge reached the service: %+v", r)
	}
	egress := testSpec(t, "dial", addr.String())
	egress.Egress = true
	var r struct{ Reply, Err string }
	runProbe(t, d, egress, &r)
	if r.Reply != "" || r.Err == "" {
		t.Fatalf("an egress job reached the service: %+v", r)
	}

	// Outward: a second service job cannot dial the first across
	// networks. (It can dial the host's own listeners through its
	// gateway: Docker's internal networks do not stop that, see
	// service_net.go.)
	out := testSpec(t, "dial", addr.String())
	out.ServicePort = 9 // nothing listens: only its network matters here
	runProbe(t, d, out, &r)
	if r.Reply != "" || r.Err == "" {
		t.Fatalf("a service job reached another service at %s: %+v", addr, r)
	}
	// The first still answers the host, so the refusals above were the
	// network's doing.
	if got := dialFromHost(t, addr.String()); got != "pong\n" {
		t.Fatalf("service answered %q", got)
	}

	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("network %s after Remove: %v", name, err)
	}
}

// After a restart a new executor of the same owner finds the service again
// (Adopt, ServiceAddr by job ID) and Remove takes its network; a service
// network whose container never came is reaped by Reconcile; a job that
// serves nothing has no address.
func TestDockerServiceAdoptAndReap(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	d.SetOwner(Owner{Node: "test-node", Instance: fmt.Sprintf("svc%d-%d", os.Getpid(), time.Now().UnixNano())})
	first, addr := startService(t, d)

	again, err := NewDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	again.SetOwner(d.Owner())
	if got, err := again.ServiceAddr(ctx, first.ID()); err != nil || got != addr {
		t.Fatalf("ServiceAddr after restart: %v, %v; want %v", got, err, addr)
	}
	adopted, err := again.Adopt(ctx, first.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := adopted.(Service).ServiceAddr(ctx); err != nil || got != addr {
		t.Fatalf("adopted ServiceAddr: %v, %v; want %v", got, err, addr)
	}
	if got := dialFromHost(t, addr.String()); got != "pong\n" {
		t.Fatalf("adopted service answered %q", got)
	}
	// Another instance's executor is refused: the container is not its.
	stranger, err := NewDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.ServiceAddr(ctx, first.ID()); !errors.Is(err, ErrNoService) {
		t.Fatalf("a stranger's ServiceAddr: %v", err)
	}
	if err := adopted.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.NetworkInspect(ctx, serviceNetworkName(first.ID()), network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("network after the adopted job's Remove: %v", err)
	}

	bare := testSpec(t)
	bare.ServicePort = 8080
	if _, err := d.serviceNetwork(ctx, &bare); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cli.NetworkRemove(context.Background(), serviceNetworkName(bare.JobID)) })
	if _, err := d.Reconcile(ctx, func(id string) bool { return id != bare.JobID }); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.NetworkInspect(ctx, serviceNetworkName(bare.JobID), network.InspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("orphaned service network survived Reconcile: %v", err)
	}

	plain, err := d.Start(ctx, testSpec(t, "ignore"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, plain)
	if _, err := plain.(Service).ServiceAddr(ctx); !errors.Is(err, ErrNoService) {
		t.Fatalf("ServiceAddr of a job without a port: %v", err)
	}
}

// dialOnDefaultBridge runs the probe's dial in a container on Docker's
// default bridge, where any container without a network of its own is.
func dialOnDefaultBridge(t *testing.T, d *Docker, addr string) (r dialed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := d.cli.ContainerCreate(ctx, &container.Config{Image: probeImage, Cmd: []string{"dial", addr}},
		&container.HostConfig{NetworkMode: "bridge"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer d.cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	if err := d.cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	waitC, errC := d.cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case err := <-errC:
		t.Fatal(err)
	}
	logs, err := d.cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("dial output %q: %v", out.Bytes(), err)
	}
	t.Logf("a container on the default bridge dialing %s: %+v", addr, r)
	return r
}
