package node

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

func at(n int64) *int64 { return &n }

// A provider attached to again replays its retained tail: the renter
// keeps only the bytes past what it had, from the same run; a new run
// (another lease) counts from its own start; the provider's own notes
// carry no offset and are kept as they come; the tail is bounded.
func TestJobLogKeepsEachByteOnce(t *testing.T) {
	var l jobLog
	l.add("L1", at(0), []byte("one\ntwo\n"))
	l.add("L1", at(0), []byte("one\ntwo\nthree\n")) // the replay after an attach
	l.add("L1", at(14), []byte("four\n"))
	l.add("L1", at(8), []byte("three\n")) // wholly old
	l.add("L1", nil, []byte("gleaner: a note\n"))
	l.add("L2", at(0), []byte("again\n"))
	l.add("L2/adopted", at(0), []byte("later\n")) // a restarted provider's copy of the output
	if got, want := string(l.data), "one\ntwo\nthree\nfour\ngleaner: a note\nagain\nlater\n"; got != want {
		t.Errorf("kept %q, want %q", got, want)
	}
	if l.lease != "L2/adopted" || l.end != 6 {
		t.Errorf("placed at %s+%d, want L2/adopted+6", l.lease, l.end)
	}
	big := bytes.Repeat([]byte("x"), logKeep)
	l.add("L2/adopted", at(6), append(big, "end\n"...))
	if len(l.data) != logKeep || !bytes.HasSuffix(l.data, []byte("xend\n")) {
		t.Errorf("kept %d bytes ending %q, want the last %d", len(l.data), l.data[len(l.data)-4:], logKeep)
	}
}

// Logs go to node.db in batches and come back when the store is opened
// again; a job whose record is gone takes its log with it.
func TestJobLogsPersistInBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), StoreFile)
	st, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	r := &renterJobs{store: st, log: quietLog, bg: t.Context(), jobs: map[string]*JobRecord{"kept": {ID: "kept"}, "gone": {ID: "gone"}},
		logs: map[string]*jobLog{}, subs: map[string][]chan JobEvent{}}
	r.appendLog("kept", "L", wireEvent{Type: "log", Log: []byte("line 1\n"), Offset: at(0)})
	r.appendLog("gone", "L", wireEvent{Type: "log", Log: []byte("other\n"), Offset: at(0)})
	var stored storedLog
	if err := st.Get(bucketJobLogs, "kept", &stored); err == nil {
		t.Error("a log line was written at once: logs are written in batches")
	}
	r.flushLogs("")
	r.appendLog("kept", "L", wireEvent{Type: "log", Log: []byte("line 2\n"), Offset: at(7)})
	r.flushLogs("kept")
	st.Close()

	st, err = OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r2 := &renterJobs{store: st, log: quietLog, bg: t.Context(), jobs: map[string]*JobRecord{"kept": {ID: "kept"}}, logs: map[string]*jobLog{}}
	if err := r2.loadLogs(); err != nil {
		t.Fatal(err)
	}
	if b, _ := r2.logsOf("kept"); string(b) != "line 1\nline 2\n" {
		t.Errorf("after reopening, the log is %q", b)
	}
	if l := r2.logs["kept"]; l == nil || l.lease != "L" || l.end != 14 {
		t.Errorf("after reopening, the log is placed at %+v, want L+14", l)
	}
	if err := st.Get(bucketJobLogs, "gone", &stored); err == nil {
		t.Error("the log of a job no longer recorded is still stored")
	}
}

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
	r := newHostileRig(t, Options{}, nil)
	rn := renterOf(t, r.ctx, r.prov)
	j, err := rn.renterJobs.submit([]byte(linesSpec("logged", "16s", 8)), nil, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, rn, j.ID, 60*time.Second, "three steps logged", func(*JobRecord) bool {
		b, _ := rn.renterJobs.logsOf(j.ID)
		return strings.Contains(string(b), "step 3/8 done")
	})
	before, _ := rn.renterJobs.logsOf(j.ID)
	rn = restartNode(t, r.ctx, rn)
	after, err := rn.renterJobs.logsOf(j.ID)
	if err != nil || !bytes.HasPrefix(after, before) || len(before) == 0 {
		t.Fatalf("after the restart the logs are %q (%v), want what was received before: %q", after, err, before)
	}
	if err := rn.Host().LibP2P().Connect(r.ctx, addrInfo(r.prov.Host())); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, rn, j.ID, 60*time.Second, "completed after the restart", func(j *JobRecord) bool { return j.State == StateCompleted })
	if done.Attempts != 1 {
		t.Errorf("completed in %d attempts, want 1", done.Attempts)
	}
	out, _ := rn.renterJobs.logsOf(j.ID)
	checkLines(t, string(out), 8)
}
