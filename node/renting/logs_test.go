package renting

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
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
	path := filepath.Join(t.TempDir(), repo.StoreFile)
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r := &Jobs{store: st, log: quietLog, bg: t.Context(), jobs: map[string]*JobRecord{"kept": {ID: "kept"}, "gone": {ID: "gone"}},
		logs: map[string]*jobLog{}, subs: map[string][]chan JobEvent{}}
	r.appendLog("kept", "L", wire.Event{Type: "log", Log: []byte("line 1\n"), Offset: at(0)})
	r.appendLog("gone", "L", wire.Event{Type: "log", Log: []byte("other\n"), Offset: at(0)})
	var stored storedLog
	if err := st.Get(store.BucketJobLogs, "kept", &stored); err == nil {
		t.Error("a log line was written at once: logs are written in batches")
	}
	r.flushLogs("")
	r.appendLog("kept", "L", wire.Event{Type: "log", Log: []byte("line 2\n"), Offset: at(7)})
	r.flushLogs("kept")
	st.Close()

	st, err = store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r2 := &Jobs{store: st, log: quietLog, bg: t.Context(), jobs: map[string]*JobRecord{"kept": {ID: "kept"}}, logs: map[string]*jobLog{}}
	if err := r2.loadLogs(); err != nil {
		t.Fatal(err)
	}
	if b, _ := r2.LogsOf("kept"); string(b) != "line 1\nline 2\n" {
		t.Errorf("after reopening, the log is %q", b)
	}
	if l := r2.logs["kept"]; l == nil || l.lease != "L" || l.end != 14 {
		t.Errorf("after reopening, the log is placed at %+v, want L+14", l)
	}
	if err := st.Get(store.BucketJobLogs, "gone", &stored); err == nil {
		t.Error("the log of a job no longer recorded is still stored")
	}
}

// A job's full log takes one line after another, as a chatty job sends
// them: the hot path of every log event once 256 KiB have been received.
func BenchmarkJobLogAddFull(b *testing.B) {
	var l jobLog
	line := []byte("step 123/1000 done: loss 0.0123, 4521 samples/s\n")
	var off int64
	for off < 2*logKeep {
		l.add("L", at(off), line)
		off += int64(len(line))
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		l.add("L", at(off), line)
		off += int64(len(line))
	}
	if len(l.data) != logKeep || cap(l.data) > 2*logKeep {
		b.Fatalf("kept %d bytes in an array of %d, want %d in at most %d", len(l.data), cap(l.data), logKeep, 2*logKeep)
	}
}

// A hostile provider's log events (offsets negative, huge or overflowing,
// a new LogRun on every event) cannot grow what the renter holds for the
// job past logKeep, nor leave a stored log that does not load again, nor
// stop an honest run that follows from being kept.
func TestJobLogHostileOffsetsStayBounded(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := &Jobs{store: st, log: quietLog, bg: t.Context(), jobs: map[string]*JobRecord{"j": {ID: "j"}},
		logs: map[string]*jobLog{}, subs: map[string][]chan JobEvent{}}
	chunk := bytes.Repeat([]byte("h"), wire.MaxLogChunk)
	for i, off := range []int64{-1, math.MinInt64, math.MaxInt64, math.MaxInt64 - int64(len(chunk)) + 1, 1 << 62, -(1 << 62)} {
		r.appendLog("j", "L", wire.Event{Type: "log", Log: chunk, Offset: at(off)})
		r.appendLog("j", "L", wire.Event{Type: "log", Log: chunk, Offset: at(off), LogRun: fmt.Sprintf("run-%d", i)})
	}
	for i := range 2 * logKeep / wire.MaxLogChunk { // every event a new run
		r.appendLog("j", "L", wire.Event{Type: "log", Log: chunk, Offset: at(0), LogRun: fmt.Sprintf("flood-%d", i)})
	}
	if l := r.logs["j"]; len(l.data) != logKeep || cap(l.data) > 2*logKeep {
		t.Fatalf("holding %d bytes in an array of %d, want at most %d", len(l.data), cap(l.data), logKeep)
	}
	// An honest run after it all is kept from its first byte.
	r.appendLog("j", "L2", wire.Event{Type: "log", Log: []byte("honest\n"), Offset: at(0)})
	r.flushLogs("")
	var stored storedLog
	if err := st.Get(store.BucketJobLogs, "j", &stored); err != nil || len(stored.Data) != logKeep || !bytes.HasSuffix(stored.Data, []byte("honest\n")) {
		t.Fatalf("stored %d bytes (%v), want the last %d ending with the honest run", len(stored.Data), err, logKeep)
	}
	r2 := &Jobs{store: st, log: quietLog, bg: t.Context(), jobs: map[string]*JobRecord{"j": {ID: "j"}}, logs: map[string]*jobLog{}}
	if err := r2.loadLogs(); err != nil {
		t.Fatal(err)
	}
	if l := r2.logs["j"]; l == nil || !bytes.Equal(l.data, stored.Data) || l.lease != "L2" || l.end != 7 {
		t.Fatal("the stored log did not load again as it was")
	}
}

// At start only the logs of jobs that may run on are read into memory;
// an ended job's log is read from node.db when asked for.
func TestAnEndedJobsLogIsReadWhenAskedFor(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), repo.StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	jobs := map[string]*JobRecord{"ended": {ID: "ended", State: StateCompleted}, "running": {ID: "running", State: StateRunning}}
	r := &Jobs{store: st, log: quietLog, bg: t.Context(), jobs: jobs, logs: map[string]*jobLog{}, subs: map[string][]chan JobEvent{}}
	r.appendLog("ended", "L", wire.Event{Type: "log", Log: []byte("done\n"), Offset: at(0)})
	r.appendLog("running", "L", wire.Event{Type: "log", Log: []byte("going\n"), Offset: at(0)})
	r.flushLogs("")

	r2 := &Jobs{store: st, log: quietLog, bg: t.Context(), jobs: jobs, logs: map[string]*jobLog{}}
	if err := r2.loadLogs(); err != nil {
		t.Fatal(err)
	}
	if _, held := r2.logs["ended"]; held || r2.logs["running"] == nil {
		t.Fatalf("held in memory after the start: ended %v, running %v; want only the running job's", held, r2.logs["running"] != nil)
	}
	for id, want := range map[string]string{"ended": "done\n", "running": "going\n"} {
		if b, err := r2.LogsOf(id); err != nil || string(b) != want {
			t.Errorf("job %s's logs are %q (%v), want %q", id, b, err, want)
		}
	}
	if _, err := r2.LogsOf("unknown"); err == nil {
		t.Error("an unknown job has logs")
	}
}
