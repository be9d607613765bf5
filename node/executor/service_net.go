package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
)

// A service job (Spec.ServicePort) listens on a port that only the
// provider's daemon may reach: the renter's traffic arrives over a libp2p
// stream the daemon forwards (node/providing/forward.go), never from the
// host's network or from other containers. The job gets a bridge network
// of its own, created with Internal: Docker drops whatever the bridge would
// forward to or from any other interface (its isolation chains), so the
// job reaches no other container, no LAN and no internet, and no other
// container reaches it. The host owns the bridge's gateway address, and
// its own packets are not forwarded: that is how the daemon connects to
// the container's IP. With inter-container traffic off as well, a
// container attached to the network by mistake could not talk to the job.
//
// What Internal does not stop: packets for the host's own addresses are
// delivered, not forwarded, so the job can connect to the host's
// listeners on any of its addresses, as every container can
// (moby/libnetwork#1151, seen on Docker 20.10); and Docker's isolation has
// a gap each time it creates any network. The bridge is named glsvc<hash>
// so that three rules close both (service_firewall.go): the daemon adds
// them when it runs with the permission, and the owner otherwise
// (docs/SERVICES.md, "Reaching a service's container").
//
// The network carries the job's labels like every per-job resource: Remove
// takes it with the container, Adopt finds it again (findResources), and
// Reconcile reaps it when its container is gone.

// LabelServicePort is the job's ServicePort on its container, so that the
// address can be found again after the provider restarts (Adopt).
const LabelServicePort = "net.gleaner.service-port"

// ErrNoService: the job serves nothing (no ServicePort), or its container
// is not (any more) where a service's must be.
var ErrNoService = errors.New("executor: job is not a service")

const bridgeName = "com.docker.network.bridge.name"

func serviceNetworkName(jobID string) string { return "gleaner-svc-" + jobID }

// serviceBridge names the bridge interface: Linux allows 15 bytes, so the
// job is a hash, of the instance too, since two nodes on one engine may
// run the same job ID.
func serviceBridge(instance, jobID string) string {
	sum := sha256.Sum256([]byte(instance + "/" + jobID))
	return serviceBridgePrefix + hex.EncodeToString(sum[:5])
}

func (s *Spec) validateService(bad func(string, ...any) error) error {
	switch {
	case s.ServicePort < 0 || s.ServicePort > 65535:
		return bad("service port %d outside 1..65535", s.ServicePort)
	case s.ServicePort > 0 && s.Egress:
		// A service's only traffic is its renter's, through the daemon.
		return bad("a service job has no egress")
	}
	return nil
}

// serviceNetwork creates the job's internal network and returns its ID.
func (d *Docker) serviceNetwork(ctx context.Context, s *Spec) (string, error) {
	ipv6 := false
	resp, err := d.cli.NetworkCreate(ctx, serviceNetworkName(s.JobID), network.CreateOptions{
		Driver: "bridge", Internal: true, EnableIPv6: &ipv6, Labels: s.labels(d.owner),
		Options: map[string]string{bridgeICC: "false", bridgeMasq: "false", bridgeName: serviceBridge(d.owner.Instance, s.JobID)},
	})
	if err != nil {
		return "", fmt.Errorf("create service network: %w", err)
	}
	return resp.ID, nil
}

// serviceContainer puts a service job's container on its network.
func serviceContainer(s *Spec, cfg *container.Config, hc *container.HostConfig) {
	if s.ServicePort == 0 {
		return
	}
	hc.NetworkMode = container.NetworkMode(serviceNetworkName(s.JobID))
	cfg.Labels[LabelServicePort] = strconv.Itoa(s.ServicePort)
}

// Service is a job that serves on a port (Spec.ServicePort).
type Service interface {
	// ServiceAddr is where the daemon connects to the job's port.
	ServiceAddr(ctx context.Context) (netip.AddrPort, error)
}

var _ Service = (*dockerJob)(nil)

// ServiceAddr implements Service, for started and adopted jobs alike.
func (j *dockerJob) ServiceAddr(ctx context.Context) (netip.AddrPort, error) {
	return j.d.serviceAddr(ctx, j.id, j.spec.JobID)
}

// ServiceAddr is where the daemon reaches jobID's port, by the job's
// container name: for a caller that holds no Job (a service it learns of
// after a restart, before Adopt).
func (d *Docker) ServiceAddr(ctx context.Context, jobID string) (netip.AddrPort, error) {
	return d.serviceAddr(ctx, containerName(jobID), jobID)
}

// serviceAddr checks, before anyone is sent there, that the container is
// the owner's, runs, and sits on its internal network alone: an address
// on any other network could be a stranger's.
func (d *Docker) serviceAddr(ctx context.Context, ref, jobID string) (netip.AddrPort, error) {
	info, err := d.cli.ContainerInspect(ctx, ref)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: job %s: %v", ErrNoService, jobID, err)
	}
	labels := info.Config.Labels
	port, _ := strconv.Atoi(labels[LabelServicePort])
	name := serviceNetworkName(jobID)
	switch {
	case labels[LabelJob] != jobID || d.owner.Instance == "" || labels[LabelInstance] != d.owner.Instance:
		return netip.AddrPort{}, fmt.Errorf("%w: job %s: its container is not this node's", ErrNoService, jobID)
	case port <= 0 || port > 65535:
		return netip.AddrPort{}, fmt.Errorf("%w: job %s", ErrNoService, jobID)
	case info.State == nil || !info.State.Running:
		return netip.AddrPort{}, fmt.Errorf("%w: job %s: its container is not running", ErrNoService, jobID)
	case info.NetworkSettings == nil || len(info.NetworkSettings.Networks) != 1 || info.NetworkSettings.Networks[name] == nil:
		return netip.AddrPort{}, fmt.Errorf("%w: job %s: its container is not on %s alone", ErrNoService, jobID, name)
	}
	ip, err := netip.ParseAddr(info.NetworkSettings.Networks[name].IPAddress)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: job %s: no address on %s", ErrNoService, jobID, name)
	}
	n, err := d.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: job %s: %v", ErrNoService, jobID, err)
	}
	if !n.Internal || n.Labels[LabelInstance] != d.owner.Instance || len(n.Containers) != 1 {
		return netip.AddrPort{}, fmt.Errorf("%w: job %s: network %s is not the job's internal network alone (internal %v, %d containers)",
			ErrNoService, jobID, name, n.Internal, len(n.Containers))
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}
