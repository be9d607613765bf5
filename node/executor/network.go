package executor

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/network"
)

// A job with egress gets a bridge network of its own instead of Docker's
// default bridge, which every container on the engine without a network of
// its own shares: there, one renter's job could reach another's (or the
// owner's containers) directly. Docker drops traffic between two bridge
// networks (its DOCKER-ISOLATION chains), and with inter-container traffic
// off a second container attached by mistake could not talk to the job
// either. The network carries the job's labels, so that Reconcile removes
// one left behind by a provider that died before removing it.
//
// Each network takes one subnet from the daemon's default-address-pools
// (about 30 with Docker's defaults), released when the job is removed.

const (
	bridgeICC  = "com.docker.network.bridge.enable_icc"
	bridgeMasq = "com.docker.network.bridge.enable_ip_masquerade"
	driverMTU  = "com.docker.network.driver.mtu"
)

func networkName(jobID string) string { return "gleaner-net-" + jobID }

// jobNetwork creates the job's network and returns its ID.
func (d *Docker) jobNetwork(ctx context.Context, s *Spec) (string, error) {
	opts := map[string]string{bridgeICC: "false", bridgeMasq: "true"}
	if mtu := d.bridgeMTU(ctx); mtu != "" {
		opts[driverMTU] = mtu
	}
	ipv6 := false
	resp, err := d.cli.NetworkCreate(ctx, networkName(s.JobID), network.CreateOptions{
		Driver: "bridge", EnableIPv6: &ipv6, Options: opts, Labels: s.labels(d.owner),
	})
	if err != nil {
		return "", fmt.Errorf("create network: %w", err)
	}
	return resp.ID, nil
}

// bridgeMTU is the default bridge's MTU, if the daemon was configured with
// one: Docker applies its --mtu to that bridge only, and a network created
// without it would get 1500 where the host's uplink may carry less, which
// breaks large packets of the job's egress. Looked up once.
func (d *Docker) bridgeMTU(ctx context.Context) string {
	d.netMu.Lock()
	defer d.netMu.Unlock()
	if !d.mtuKnown {
		if n, err := d.cli.NetworkInspect(ctx, "bridge", network.InspectOptions{}); err == nil {
			d.mtu, d.mtuKnown = n.Options[driverMTU], true
		}
	}
	return d.mtu
}
