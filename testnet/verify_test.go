package testnet

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/trust"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
)

// knownAnswer is what an honest run of `demojob -answer n` prints, hashed:
// the renter knows it without trusting any provider.
func knownAnswer(n int) string {
	sum := sha256.Sum256([]byte("gleaner"))
	for i := 1; i < n; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprintf("answer %d: %x\n", n, sum))))
}

func answerSpec(name string, n int, verify string) string {
	return jobSpec(name, "bronze", "-answer", fmt.Sprint(n)) + "verify: " + verify + "\n"
}

// TestKnownAnswersAndReplicasCatchAProviderThatSkipsTheWork: three
// providers, one of which reports made-up output hashes. A renter with a
// canary configured checks every provider it awards a job to; a job with
// verify.replicas 3 runs on all three and the odd one out fails; a
// known-answer job pinned to the cheat fails. Every result is a probe
// entry, and the cheat ends up scored below the honest providers.
func TestKnownAnswersAndReplicasCatchAProviderThatSkipsTheWork(t *testing.T) {
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 20000
	canary := filepath.Join(t.TempDir(), "canary.yaml")
	if err := os.WriteFile(canary, []byte(answerSpec("canary", n, fmt.Sprintf("{expect_sha256: %s}", knownAnswer(n)))), 0o600); err != nil {
		t.Fatal(err)
	}
	const renterIdx, cheatIdx = 3, 1
	c, err := NewCluster(ctx, ClusterOptions{Nodes: 4,
		Configure: func(i int, cfg *repo.Config) {
			if i < renterIdx {
				cfg.Provider.SimulateGPUs = "2xRTX4090" // room for a canary next to a job
			} else {
				cfg.Trust.CanarySpec = canary
			}
		},
		Tune: func(i int, o *node.Options) { o.WrongAnswers = i == cheatIdx }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitPeers(t, c, 2, 20*time.Second)
	ids := make([]string, renterIdx)
	for i := range ids {
		setOffer(t, c, i, "0.90")
		ids[i] = c.Nodes()[i].Host().ID().String()
	}
	waitBooks(t, c, 5*time.Second, "every offer", func(b map[string]bool) bool { return b[ids[0]] && b[ids[1]] && b[ids[2]] })
	renter, _ := c.Client(renterIdx)

	// Three replicas, three different providers; the cheat is outvoted.
	first := submitJob(t, renter, answerSpec("replicated", n, "{replicas: 3}"))
	if len(first.Replicas) != 3 {
		t.Fatalf("replicas %v", first.Replicas)
	}
	byProvider := map[string]renting.JobRecord{}
	for _, id := range first.Replicas {
		j := waitRecord(t, renter, id, func(j renting.JobRecord) bool { return j.Verified != "" }, time.Minute)
		byProvider[j.Provider] = j
	}
	if len(byProvider) != 3 {
		t.Fatalf("replicas ran on %d providers, want 3 different ones", len(byProvider))
	}
	for i, id := range ids {
		want := string(ledger.ProbePassed)
		if i == cheatIdx {
			want = string(ledger.ProbeFailed)
		}
		if j := byProvider[id]; j.State != renting.StateCompleted || j.Verified != want {
			t.Errorf("provider %d's replica: state %s, verified %q, want %q", i, j.State, j.Verified, want)
		}
	}

	// The renter's canary went to every provider it awarded a job to.
	eventuallyT(t, time.Minute, "a decided canary for every provider", func() bool {
		var jobs []renting.JobRecord
		if renter.Call(ctx, "job_list", nil, &jobs) != nil {
			return false
		}
		got := map[string]ledger.ProbeResult{}
		for _, j := range jobs {
			if j.Canary && j.Verified != "" {
				got[j.Pin] = ledger.ProbeResult(j.Verified)
			}
		}
		return got[ids[0]] == ledger.ProbePassed && got[ids[2]] == ledger.ProbePassed && got[ids[cheatIdx]] == ledger.ProbeFailed
	})

	// A known-answer job pinned to the cheat fails with a clear reason.
	var pinned renting.JobRecord
	if err := renter.Call(ctx, "job_submit", node.JobSubmitParams{
		Spec: answerSpec("pinned", n, fmt.Sprintf("{expect_sha256: %s}", knownAnswer(n))), Provider: ids[cheatIdx]}, &pinned); err != nil {
		t.Fatal(err)
	}
	pinned = waitJob(t, renter, pinned.ID, ended, time.Minute)
	if pinned.State != renting.StateFailed || pinned.Provider != ids[cheatIdx] || !strings.Contains(pinned.Error, "wrong answer") {
		t.Fatalf("known-answer job on the cheat: %+v", pinned)
	}

	// Probes are ledger entries the reputation reads: the cheat ranks
	// below the honest providers, whose canary streak has begun.
	eventuallyT(t, 15*time.Second, "probe-based reputation", func() bool {
		ev := make([]trust.Evidence, 3)
		for i, id := range ids {
			if renter.Call(ctx, "rep_show", node.PeerParamsRep{Peer: id}, &ev[i]) != nil {
				return false
			}
		}
		score := func(e trust.Evidence) float64 {
			if e.Score == nil {
				return 0
			}
			return *e.Score
		}
		return ev[cheatIdx].Probes[ledger.ProbeFailed] >= 3 && ev[cheatIdx].CanaryStreak == 0 &&
			ev[0].CanaryStreak >= 1 && ev[2].Probes[ledger.ProbePassed] >= 2 &&
			score(ev[0]) > score(ev[cheatIdx]) && score(ev[2]) > score(ev[cheatIdx])
	})
}

// The example canary in the docs carries the right answer.
func TestExampleCanaryKnowsItsAnswer(t *testing.T) {
	b, err := os.ReadFile("../docs/examples/canary.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "expect_sha256: "+knownAnswer(20000)) || !strings.Contains(string(b), `"-answer", "20000"`) {
		t.Fatalf("docs/examples/canary.yaml does not expect %s for -answer 20000", knownAnswer(20000))
	}
}
