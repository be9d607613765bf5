package node

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// linesSpec prints a hello line, then "step i/n done" every sleep/n.
func linesSpec(name, sleep string, lines int) string {
	return fmt.Sprintf("name: %s\nimage: %s\ncommand: [\"-sleep\", \"%s\", \"-lines\", \"%d\"]\nresources: {gpus: 1}\n"+
		"tier: silver\nmax_price: 1.00\nduration: {expected: 30s, max: 2m}\nallow_simulated: true\nretry: {max_reauctions: 0}\n",
		name, demoimage.Tag, sleep, lines)
}

// checkLines fails unless out holds the job's hello, each of its n steps
// and its end, each once and in order.
func checkLines(t *testing.T, out string, n int) {
	t.Helper()
	want := []string{"hello from a gleaner job"}
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("step %d/%d done", i, n))
	}
	want = append(want, "job finished")
	rest := out
	for _, w := range want {
		if c := strings.Count(out, w); c != 1 {
			t.Errorf("%q appears %d times in the logs, want once:\n%s", w, c, out)
			return
		}
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("%q out of order in the logs:\n%s", w, out)
			return
		}
		rest = rest[i+len(w):]
	}
}

// After a renter restart, `job logs` prints what was received before it,
// and the running job's output goes on: each line once, although the
// provider replays its retained tail on the attach.
func TestJobLogsSurviveARenterRestart(t *testing.T) {
	waitsOnItsOwnJobs(t)
	r := newHostileRig(t, Options{}, nil)
	rn := renterOf(t, r.ctx, r.prov)
	j, err := rn.renterJobs.Submit([]byte(linesSpec("logged", "16s", 8)), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, j.ID, 60*time.Second, "three steps logged", func(*renting.JobRecord) bool {
		b, _ := rn.renterJobs.LogsOf(j.ID)
		return strings.Contains(string(b), "step 3/8 done")
	})
	before, _ := rn.renterJobs.LogsOf(j.ID)
	rn = restartNode(t, r.ctx, rn)
	after, err := rn.renterJobs.LogsOf(j.ID)
	if err != nil || !bytes.HasPrefix(after, before) || len(before) == 0 {
		t.Fatalf("after the restart the logs are %q (%v), want what was received before: %q", after, err, before)
	}
	if err := rn.Host().LibP2P().Connect(r.ctx, addrInfo(r.prov.Host())); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, rn, j.ID, 60*time.Second, "completed after the restart", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	if done.Attempts != 1 {
		t.Errorf("completed in %d attempts, want 1", done.Attempts)
	}
	out, _ := rn.renterJobs.LogsOf(j.ID)
	checkLines(t, string(out), 8)
}
