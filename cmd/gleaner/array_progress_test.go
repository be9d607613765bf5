package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/node/renting"
)

func arrayAt(state string, done, running, waiting int, eta *int64) renting.JobRecord {
	v := &renting.ArrayView{Shards: 4, MaxParallel: 2, Done: done, Running: running, Waiting: waiting, Spent: 250_000, ETASeconds: eta}
	for i := range 4 {
		v.ShardJobs = append(v.ShardJobs, renting.ShardView{Index: i, Job: "arr-s" + string(rune('0'+i))})
	}
	return renting.JobRecord{ID: "arr", State: state, ArrayView: v}
}

func eta(s int64) *int64 { return &s }

// polls is the status a node would answer, poll after poll.
func polls(seq ...renting.JobRecord) func(context.Context) (renting.JobRecord, error) {
	i := 0
	return func(context.Context) (renting.JobRecord, error) {
		j := seq[min(i, len(seq)-1)]
		i++
		return j, nil
	}
}

// A run of an array: nothing done, then one shard done (with an ETA),
// the same again (shown once), then every shard done.
var arrayRun = []renting.JobRecord{
	arrayAt("running", 0, 2, 2, nil),
	arrayAt("running", 1, 2, 1, eta(240)),
	arrayAt("running", 1, 2, 1, eta(240)),
	arrayAt("completed", 4, 0, 0, nil),
}

func TestProgressBar(t *testing.T) {
	for _, c := range []struct {
		v    renting.ArrayView
		want string
	}{
		{renting.ArrayView{Shards: 4}, "[....................]"},
		{renting.ArrayView{Shards: 4, Done: 1, Running: 1, Auction: 1}, "[#####----------.....]"},
		{renting.ArrayView{Shards: 3, Done: 2, Reauctioning: 1}, "[#############-------]"},
		{renting.ArrayView{Shards: 100, Done: 99, Running: 1}, "[###################-]"}, // 99% is not a full bar
		{renting.ArrayView{Shards: 100, Done: 100}, "[####################]"},
		{renting.ArrayView{Shards: 10, Done: 5, Failed: 5}, "[##########..........]"},
	} {
		if got := progressBar(&c.v, 20); got != c.want {
			t.Errorf("%+v: %q, want %q", c.v, got, c.want)
		}
	}
}

// Without a terminal: a plain line each time the progress changes, the
// last the final state's.
func TestWatchArrayPlainLines(t *testing.T) {
	var out bytes.Buffer
	final, err := watchArray(context.Background(), polls(arrayRun...), &lineWatcher{w: &out}, 0)
	if err != nil || final.State != "completed" {
		t.Fatalf("final %s, %v", final.State, err)
	}
	want := "0/4 done, 2 running, 0 re-auctioning, 0 failed; spent 0.25 credits\n" +
		"1/4 done, 2 running, 0 re-auctioning, 0 failed; spent 0.25 credits; ETA 4m\n" +
		"4/4 done, 0 running, 0 re-auctioning, 0 failed; spent 0.25 credits\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// On a terminal: one line rewritten in place (\r), cut to the terminal's
// width, padded over a longer one before it, ended by a newline.
func TestWatchArrayBarOnATerminal(t *testing.T) {
	var out bytes.Buffer
	if _, err := watchArray(context.Background(), polls(arrayRun...), &barWatcher{w: &out, width: 60}, 0); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Fatalf("not one line rewritten in place: %q", s)
	}
	frames := strings.Split(strings.TrimSuffix(s, "\n"), "\r")[1:]
	if len(frames) != 3 {
		t.Fatalf("%d frames, want 3 (one per change): %q", len(frames), frames)
	}
	want := []string{"[----------..........] 0/4 done, 2 running, 0 re-auctioning",
		"[#####----------.....] 1/4 done, 2 running, 0 re-auctioning",
		"[####################] 4/4 done, 0 running, 0 re-auctioning"}
	for i, f := range frames {
		if strings.TrimRight(f, " ") != want[i] || len(f) > 59 {
			t.Errorf("frame %d: %q, want %q within 59 columns", i, f, want[i])
		}
	}

	// On a wide terminal the ETA fits; the final line, shorter, blanks
	// what is left of it.
	out.Reset()
	if _, err := watchArray(context.Background(), polls(arrayRun...), &barWatcher{w: &out, width: 200}, 0); err != nil {
		t.Fatal(err)
	}
	frames = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\r")[1:]
	withETA, last := frames[1], frames[2]
	if !strings.HasSuffix(withETA, "; ETA 4m") || len(last) != len(withETA) || strings.TrimRight(last, " ") == last {
		t.Errorf("the final frame %q does not cover %q", last, withETA)
	}
}

// With --json: one object per line per change, the last of type final
// with the array's record, every shard's job in it.
func TestWatchArrayJSONStream(t *testing.T) {
	var out bytes.Buffer
	if _, err := watchArray(context.Background(), polls(arrayRun...), newJSONWatcher(&out), 0); err != nil {
		t.Fatal(err)
	}
	var got []ArrayProgress
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var p ArrayProgress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, p)
	}
	if len(got) != 3 {
		t.Fatalf("%d objects, want 3: %+v", len(got), got)
	}
	if got[0].Type != "progress" || got[0].Done != 0 || got[0].ETASeconds != nil || got[0].Array != nil {
		t.Errorf("first: %+v", got[0])
	}
	if got[1].Done != 1 || got[1].Waiting != 1 || got[1].ETASeconds == nil || *got[1].ETASeconds != 240 || got[1].Spent != 250_000 {
		t.Errorf("second: %+v", got[1])
	}
	last := got[2]
	if last.Type != "final" || last.State != "completed" || last.Done != 4 || last.Array == nil || len(last.Array.ArrayView.ShardJobs) != 4 {
		t.Errorf("last: %+v", last)
	}
}

// A poll that fails ends the watch with its error; so does the context.
func TestWatchArrayStops(t *testing.T) {
	boom := errors.New("node gone")
	fail := func(context.Context) (renting.JobRecord, error) { return renting.JobRecord{}, boom }
	if _, err := watchArray(context.Background(), fail, &lineWatcher{w: &bytes.Buffer{}}, 0); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := watchArray(ctx, polls(arrayRun[0]), &lineWatcher{w: &bytes.Buffer{}}, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
