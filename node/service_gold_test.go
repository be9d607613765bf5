package node

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

// A service of gold reservations (the same holds for a gold floor) keeps
// serving once the spec's start has passed: its replica's job ends (here
// cancelled by hand, as a lost replica would be), and healing buys the replacement
// as a gold reservation from a few seconds ahead, which the provider
// quotes and runs, instead of asking for the spec's start, which every
// offer rejects as passed.
func TestAGoldFloorReplicaIsReplacedAfterTheStart(t *testing.T) {
	waitsOnItsOwnJobs(t)
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := startSellerWith(t, ctx, Options{}, func(s *offers.Settings) {
		goldProvider(s)
		s.Policy.Workloads = []string{"batch", "service"}
	})
	id := prov.Host().ID().String()
	t.Cleanup(func() { removeDockerOf(id) })
	rn := renterOf(t, ctx, prov)
	spec := "name: goldfloor\nkind: service\nimage: " + modelimage.Tag + "\n" +
		"env: {MODELSERVER_LOAD_DELAY: 100ms}\n" +
		"service:\n  port: " + strconv.Itoa(modelimage.Port) + "\n  readiness: {path: /health, period: 1s}\n  replicas: {min: 1, max: 1}\n" +
		"resources: {gpus: 1}\ntier: gold\nstart: \"+2s\"\nmax_price: 2.00\nduration: {max: 10m}\nallow_simulated: true\n"
	if _, err := serviceAPIOf(rn).Up(ctx, services.ServiceUpParams{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	v := waitService(t, rn, "goldfloor", 90*time.Second, "the gold replica ready", func(v *services.ServiceView) bool { return readyOn(v, 1) })
	first := v.Replicas[0].Job
	if j, err := rn.renterJobs.Get(first); err != nil || !goldJob(j) {
		t.Fatalf("the replica %s is not a gold reservation: %v", first, err)
	}
	if _, err := rn.renterJobs.Cancel(ctx, first); err != nil {
		t.Fatal(err)
	}
	v = waitService(t, rn, "goldfloor", 90*time.Second, "a replacement gold replica ready", func(v *services.ServiceView) bool {
		return readyOn(v, 1) && v.Replicas[0].Job != first
	})
	j, err := rn.renterJobs.Get(v.Replicas[0].Job)
	if err != nil || !goldJob(j) {
		t.Fatalf("the replacement %s is not a gold reservation: %v", v.Replicas[0].Job, err)
	}
	if err := gatewayGet(v.URL + "/health"); err != nil {
		t.Fatal(err)
	}
}

// goldJob: j's spec is a gold reservation.
func goldJob(j *renting.JobRecord) bool {
	s, err := auction.ParseJobSpec([]byte(j.Spec))
	return err == nil && s.Tier == auction.Gold && !s.Start.IsZero()
}
