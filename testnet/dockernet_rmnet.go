package testnet

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// removeNetwork removes a Docker network whose containers have just been
// removed. The engine can still list an endpoint for a moment after
// `docker rm -f` returns (more often for a container that was killed,
// restarted or taken off and put back on a network, which is what the
// soak does), and then refuses with "has active endpoints". So it retries,
// and from the second try force-disconnects whatever the network still
// lists; only a network that outlives all that is an error.
func removeNetwork(ctx context.Context, net string) error {
	var last error
	for try := 0; try < 8; try++ {
		_, err := docker(ctx, "network", "rm", net)
		if err == nil || strings.Contains(err.Error(), "not found") {
			return nil
		}
		last = err
		if !strings.Contains(err.Error(), "active endpoints") {
			return err
		}
		if try > 0 {
			forceDisconnectAll(ctx, net)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", last, ctx.Err())
		case <-time.After(time.Duration(250*(try+1)) * time.Millisecond):
		}
	}
	return last
}

// forceDisconnectAll takes every endpoint the engine still lists off net.
// Errors are left to the caller's next `network rm` to report.
func forceDisconnectAll(ctx context.Context, net string) {
	// Names as well as IDs: a stale endpoint is only found by its name.
	out, err := docker(ctx, "network", "inspect", "-f", "{{range $id, $c := .Containers}}{{$id}} {{$c.Name}} {{end}}", net)
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		_, _ = docker(ctx, "network", "disconnect", "-f", net, id)
	}
}
