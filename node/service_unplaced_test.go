package node

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/node/store"
)

// Services whose replicas cannot be placed (docs/SERVICES.md, "When no
// replica can be placed"): real nodes in this process, libp2p on
// loopback. service_up used to answer with a URL whose gateway served
// 503 while the replicas ended no-match and were bought again in
// silence; the cause showed only in `job explain`.

// unplacedSpec is a one-replica service of image; extra is added to the
// spec's top level.
func unplacedSpec(name, image, extra string) string {
	return "name: " + name + "\nkind: service\nimage: " + image + "\n" +
		"service:\n  port: 8000\n  readiness: {path: /health, period: 1s}\n  replicas: {min: 1, max: 1}\n" +
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 1h}\nallow_simulated: true\n" + extra
}

// notPlacedErr checks that err is service_up's services.CodeServiceNotPlaced and
// returns the service it carries.
func notPlacedErr(t *testing.T, err error) (*rpc.Error, *services.ServiceView) {
	t.Helper()
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != services.CodeServiceNotPlaced {
		t.Fatalf("service_up: %v, want code %d", err, services.CodeServiceNotPlaced)
	}
	v, ok := re.Data.(*services.ServiceView)
	if !ok || v.Up == nil {
		t.Fatalf("service_up's error data: %#v, want the service with its up outcome", re.Data)
	}
	return re, v
}

// The only provider sells batch jobs, not services: service_up with a
// wait fails within seconds naming the providers' reason and `job
// explain`, and leaves nothing (no record, no gateway, no live job).
// Without a wait it comes up as before, and service_status names the
// cause, kept in the record, while healing goes on. A replica auctioned
// again (retry.max_reauctions) is still being placed when a short wait
// ends: the service is kept, and the error and status say why so far.
func TestServiceUpThatCannotBePlacedFailsNamingWhy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prov := startSeller(t, ctx, nil) // workloads: batch only
	rn := renterOf(t, ctx, prov)
	api := serviceAPIOf(rn)
	const image = "gleaner-test/never-pulled:1"

	t.Run("taken down", func(t *testing.T) {
		began := time.Now()
		_, err := api.Up(ctx, services.ServiceUpParams{Spec: unplacedSpec("nowhere", image, ""), WaitS: 30})
		took := time.Since(began)
		re, v := notPlacedErr(t, err)
		t.Logf("after %v: %s", took.Round(time.Millisecond), re.Message)
		if took > 15*time.Second {
			t.Errorf("service_up failed after %v; a no-match is known within seconds", took)
		}
		for _, want := range []string{"service nowhere could not be placed", "no-match", auction.ReasonWorkload, "gleaner job explain", "taken down"} {
			if !strings.Contains(re.Message, want) {
				t.Errorf("service_up's error lacks %q: %s", want, re.Message)
			}
		}
		if v.Up.Result != services.UpNotPlaced || v.Up.Kept || !strings.Contains(v.Up.Cause, auction.ReasonWorkload) || v.Gateway != "down" || v.URL != "" {
			t.Errorf("service_up's outcome: %+v, gateway %s %q", v.Up, v.Gateway, v.URL)
		}
		if _, err := rn.renterServices.View("nowhere", false); err == nil {
			t.Error("the service is still up after service_up failed")
		}
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(v.Port))); err != nil {
			t.Errorf("the gateway's port %d is still held: %v", v.Port, err)
		} else {
			ln.Close()
		}
		for _, j := range rn.renterJobs.Siblings("") {
			if j.Service == "nowhere" && !renting.Terminal(j.State) {
				t.Errorf("job %s of the service is %s after it was taken down", j.ID, j.State)
			}
		}
	})

	t.Run("kept without a wait", func(t *testing.T) {
		if _, err := api.Up(ctx, services.ServiceUpParams{Spec: unplacedSpec("patient", image, "")}); err != nil {
			t.Fatal(err)
		}
		v := waitService(t, rn, "patient", 20*time.Second, "status naming why no replica is placed", func(v *services.ServiceView) bool {
			return strings.Contains(v.NotPlaced, auction.ReasonWorkload)
		})
		t.Logf("not placed: %s", v.NotPlaced)
		if !strings.Contains(v.NotPlaced, "no-match") || !strings.Contains(v.NotPlaced, "gleaner job explain") {
			t.Errorf("not_placed: %q", v.NotPlaced)
		}
		// The keeper keeps the cause in the service's record (its next
		// sync, within a second), stored, so a restart shows it too.
		var stored services.ServiceRecord
		waitFor(t, 10*time.Second, "the cause in the stored record", func() bool {
			return rn.store.Get(store.BucketServices, "patient", &stored) == nil && strings.Contains(stored.NotPlaced, auction.ReasonWorkload)
		})
		if v, _ := rn.renterServices.View("patient", false); v.Heal != "" || v.Gateway != "up" {
			t.Errorf("a service without supply: heal error %q, gateway %s; want healing going on", v.Heal, v.Gateway)
		}
		if _, err := api.Down(ctx, services.ServiceNameParams{Name: "patient"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("kept when the wait ends first", func(t *testing.T) {
		began := time.Now()
		_, err := api.Up(ctx, services.ServiceUpParams{Spec: unplacedSpec("retrying", image, "retry: {max_reauctions: 8}\n"), WaitS: 2})
		re, v := notPlacedErr(t, err)
		t.Logf("after %v: %s", time.Since(began).Round(time.Millisecond), re.Message)
		if v.Up.Result != services.UpTimedOut || !v.Up.Kept || v.Gateway != "up" || !strings.Contains(re.Message, "gleaner service down retrying") ||
			!strings.Contains(re.Message, auction.ReasonWorkload) {
			t.Errorf("service_up's outcome: %+v, gateway %s", v.Up, v.Gateway)
		}
		st, err := api.Status(ctx, services.ServiceNameParams{Name: "retrying"})
		if err != nil {
			t.Fatalf("the kept service: %v", err)
		}
		if !strings.Contains(st.NotPlaced, auction.ReasonWorkload) {
			t.Errorf("status's not_placed while the replica is auctioned again: %q", st.NotPlaced)
		}
		if _, err := api.Down(ctx, services.ServiceNameParams{Name: "retrying"}); err != nil {
			t.Fatal(err)
		}
	})
}

// An image no provider can pull: both providers that take the replica
// fail to pull it, and service_up with a wait fails naming the image,
// in seconds, with the service taken down.
func TestServiceUpOfAnImageNoProviderCanPullFails(t *testing.T) {
	requireDemoImage(t) // a running Docker engine
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rn := renterOf(t, ctx, serviceSeller(t, ctx), serviceSeller(t, ctx))
	const image = "127.0.0.1:1/gleaner-test/missing:none" // refused at once
	began := time.Now()
	_, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: unplacedSpec("unpullable", image, ""), WaitS: 60})
	re, v := notPlacedErr(t, err)
	t.Logf("after %v: %s", time.Since(began).Round(time.Millisecond), re.Message)
	if !strings.Contains(re.Message, "could not pull the image \""+image+"\"") || !strings.Contains(re.Message, "taken down") {
		t.Errorf("service_up's error does not name the image's pull: %s", re.Message)
	}
	if v.Up.Result != services.UpNotPlaced || v.Up.Kept {
		t.Errorf("service_up's outcome: %+v", v.Up)
	}
	if _, err := rn.renterServices.View("unpullable", false); err == nil {
		t.Error("the service is still up after service_up failed")
	}
}
