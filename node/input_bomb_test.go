package node

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/data/datatest"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
	"github.com/ipfs/go-cid"
)

// The input bomb on real daemons (libp2p, bitswap, bbolt, Docker): a
// renter whose job names two folders of 2,500 entries that all link one
// 256 KiB block, each two blocks to serve and 625 MiB to write out. Its
// provider, limited to data.max_job_input_gib = 1, fetches both (a few
// hundred KB), measures them, and refuses the job naming the limit before
// it makes a volume or a container; nothing is charged and the fetched
// roots are not kept.
func TestInputBombIsRefusedByTheProvider(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prov := startNodeWith(t, ctx, func(c *repo.Config) {
		c.Provider.SimulateGPUs = "1xRTX4090"
		c.Data.MaxJobInputGiB = 1
	}, Options{})
	if _, err := prov.provider.Update(func(s offers.Settings) (offers.Settings, error) {
		s.Region = auction.Region{Country: "DE", Continent: "eu"}
		s.Prices.Bronze, s.Prices.Silver = 500_000, 500_000
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	prov.provider.Poke()
	waitFor(t, 20*time.Second, "the provider's offer", func() bool {
		cur := prov.provider.Current()
		return cur != nil && len(cur.GPUs) == 1
	})
	rn := renterOf(t, ctx, prov)
	var bombs []cid.Cid
	for seed := range uint64(2) {
		c, err := datatest.RepeatedFolder(ctx, rn.data.DAG(), seed+1, 2500, data.ChunkSize)
		if err != nil {
			t.Fatal(err)
		}
		if err := rn.data.Pin(ctx, c); err != nil {
			t.Fatal(err)
		}
		bombs = append(bombs, c)
	}
	spec := "name: bomb\nimage: " + demoimage.Tag + "\ncommand: [\"-sleep\", \"1s\"]\nresources: {gpus: 1}\ntier: bronze\n" +
		"max_price: 1.00\nduration: {expected: 1m, max: 5m}\nallow_simulated: true\nretry: {max_reauctions: 0}\ninputs:\n" +
		"  - {cid: " + bombs[0].String() + ", path: /in/a}\n  - {cid: " + bombs[1].String() + ", path: /in/b}\n"
	sub, err := rn.renterJobs.Submit([]byte(spec), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var why string
	j := waitJob(t, rn, sub.ID, time.Minute, "the refusal", func(j *renting.JobRecord) bool {
		if strings.Contains(j.Error, "data.max_job_input_gib") {
			why = j.Error
		}
		return why != "" // then it waits for another provider: there is none
	})
	t.Logf("job %s: %s: %s", j.ID, j.State, why)
	for _, w := range []string{"inputs[1] " + bombs[1].String(), "refused", "data.max_job_input_gib (1GiB)"} {
		if !strings.Contains(why, w) {
			t.Errorf("the job's error %q does not say %q", why, w)
		}
	}
	if j.Charged != nil && *j.Charged != 0 {
		t.Errorf("charged %d", *j.Charged)
	}
	waitFor(t, 10*time.Second, "the provider's settlement", func() bool { return len(settlementsFor(t, prov, rn.Host().ID().String())) == 1 })
	if s := settlementsFor(t, prov, rn.Host().ID().String())[0]; s.Charged == nil || *s.Charged != 0 {
		t.Errorf("the provider settled the refused job charging %v", s.Charged)
	}
	// Nothing was written: no container, no input volume.
	if got := containers(t, sub.ID); len(got) != 0 {
		t.Errorf("containers: %v", got)
	}
	out, err := exec.Command("docker", "volume", "ls", "-q", "--filter", "name=gleaner-in-").CombinedOutput()
	if err != nil {
		t.Fatalf("docker volume ls: %v: %s", err, out)
	}
	if strings.Contains(string(out), sub.ID) {
		t.Errorf("input volumes of the refused job: %s", out)
	}
	// The provider's store holds the bombs' few blocks, not what they
	// describe, and keeps neither pinned.
	if used := prov.data.Used(); used > 4<<20 {
		t.Errorf("the provider's store holds %d bytes", used)
	}
	for _, c := range bombs {
		if pinned, _ := prov.data.Pinned(ctx, c); pinned {
			t.Errorf("the provider keeps %s pinned", c)
		}
	}
}
