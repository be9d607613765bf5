package node

import (
	"slices"
	"testing"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
)

// gpuFixture is a provider with four GPUs, GPU 3 withdrawn by its owner.
func gpuFixture() *providerJobs {
	inv := attest.Inventory{}
	for i, u := range []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d"} {
		inv.GPUs = append(inv.GPUs, attest.GPU{Index: i, UUID: u, Model: "RTX4090"})
	}
	p := &provider{avail: attest.Availability{Inventory: inv, Available: []int{0, 1, 2}}}
	return &providerJobs{p: p, leases: map[string]*activeLease{}, used: map[int]bool{}}
}

func (pj *providerJobs) hold(job string, tier auction.Tier, gpus ...int) *activeLease {
	al := &activeLease{lease: &auction.Lease{JobID: job, Tier: tier}, gpus: gpus, preempt: make(chan string, 1), done: make(chan struct{})}
	pj.leases[job] = al
	for _, g := range gpus {
		pj.used[g] = true
	}
	return al
}

// A bid names the GPUs the provider will give; an award gets exactly
// those or nothing, so a lease's GPUs are always the provider's choice.
func TestBidsNameTheGPUsAwardsGet(t *testing.T) {
	pj := gpuFixture()
	plan := pj.planGPUs(2, auction.Silver)
	if !slices.Equal(plan, []int{0, 1}) {
		t.Fatalf("plan %v, want the free GPUs 0, 1", plan)
	}
	hashes := pj.hashesOf(plan)
	if len(hashes) != 2 || hashes[0] != attest.UUIDHash("GPU-a") || !slices.Equal(pj.indexesOf(hashes), plan) {
		t.Fatalf("hashes %v", hashes)
	}
	if pj.indexesOf([]string{"not-here"}) != nil {
		t.Fatal("a hash of no GPU here mapped to one")
	}
	if got, _ := pj.claimGPUs(plan, auction.Silver); !slices.Equal(got, plan) {
		t.Fatalf("claim %v", got)
	}
	pj.hold("silver", auction.Silver, plan...)
	// GPU 3 is the owner's, 0 and 1 are a silver job's: one GPU left.
	if p := pj.planGPUs(2, auction.Gold); p != nil {
		t.Fatalf("planned %v over a silver lease and a withdrawn GPU", p)
	}
	if got, _ := pj.claimGPUs([]int{1}, auction.Gold); got != nil {
		t.Fatal("claimed a GPU a silver lease holds")
	}
	if got, _ := pj.claimGPUs([]int{3}, auction.Bronze); got != nil {
		t.Fatal("claimed a GPU its owner withdrew")
	}

	// Bronze is preemptible: a silver award may take exactly its GPUs.
	pj = gpuFixture()
	bronze := pj.hold("bronze", auction.Bronze, 0, 1)
	if p := pj.planGPUs(3, auction.Bronze); p != nil {
		t.Fatalf("a bronze bid planned over another bronze lease: %v", p)
	}
	plan = pj.planGPUs(2, auction.Silver)
	if !slices.Equal(plan, []int{0, 1}) && !slices.Equal(plan, []int{0, 2}) && !slices.Equal(plan, []int{1, 2}) {
		t.Fatalf("silver plan %v", plan)
	}
	got, after := pj.claimGPUs([]int{1, 2}, auction.Silver)
	if !slices.Equal(got, []int{1, 2}) || len(after) != 1 {
		t.Fatalf("claim over bronze: %v, waits for %d", got, len(after))
	}
	if reason := <-bronze.preempt; reason == "" || !slices.Equal(bronze.gpus, []int{0}) {
		t.Fatalf("the bronze lease keeps %v (want only GPU 0 to free on release)", bronze.gpus)
	}
}
