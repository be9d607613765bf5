package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/renting"
)

// How job run shows an array's progress while it follows it: a bar
// rewritten in place on a terminal, a plain line per change otherwise
// (logs, CI), and with --json a JSON object per line on stdout, one per
// change, the last of type "final" with the array's whole record. Each
// is an arrayWatcher; watchArray polls and feeds one.

// arrayWatcher shows what each poll of an array's status says.
type arrayWatcher interface {
	progress(j renting.JobRecord) error // every poll while the array runs
	final(j renting.JobRecord) error    // once, when it has ended
}

// watchArray polls the array until it ends (or ctx does), showing each
// poll on w, and returns the last record it read.
func watchArray(ctx context.Context, poll func(context.Context) (renting.JobRecord, error), w arrayWatcher, every time.Duration) (renting.JobRecord, error) {
	for {
		j, err := poll(ctx)
		if err != nil {
			return j, err
		}
		if renting.Terminal(j.State) {
			return j, w.final(j)
		}
		if err := w.progress(j); err != nil {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(every):
		}
	}
}

// barWidth is the progress bar's cells, each 1/barWidth of the shards.
const barWidth = 20

// progressBar draws the shards as cells: '#' done, '-' in flight, '.'
// the rest (waiting, or failed), such as [#########------..........].
// A cell is filled only when its whole share is done, so a bar full of
// '#' means every shard is.
func progressBar(v *renting.ArrayView, width int) string {
	if v.Shards <= 0 {
		return "[" + strings.Repeat(".", width) + "]"
	}
	done := v.Done * width / v.Shards
	flight := min((v.Done+v.Running+v.Auction+v.Reauctioning)*width/v.Shards, width) - done
	return "[" + strings.Repeat("#", done) + strings.Repeat("-", flight) + strings.Repeat(".", width-done-flight) + "]"
}

// barWatcher rewrites one line on a terminal: the bar, then the line,
// cut to the terminal's width (a line that wrapped could not be
// rewritten with \r).
type barWatcher struct {
	w     io.Writer
	width int // the terminal's columns; 0: 80
	last  string
}

func newBarWatcher(f *os.File) *barWatcher { return &barWatcher{w: f, width: termWidth(f)} }

func (b *barWatcher) progress(j renting.JobRecord) error {
	line := progressBar(j.ArrayView, barWidth) + " " + j.ArrayView.Line()
	width := b.width
	if width <= 0 {
		width = 80
	}
	if len(line) > width-1 { // the line is ASCII: bytes are columns
		line = line[:width-1]
	}
	if line == b.last {
		return nil
	}
	// Padded to the last line's length, so a shorter one leaves none of
	// it behind.
	pad := max(len(b.last)-len(line), 0)
	b.last = line
	_, err := fmt.Fprintf(b.w, "\r%s%s", line, strings.Repeat(" ", pad))
	return err
}

func (b *barWatcher) final(j renting.JobRecord) error {
	if err := b.progress(j); err != nil {
		return err
	}
	_, err := fmt.Fprintln(b.w)
	return err
}

// lineWatcher writes a plain line each time the progress changes.
type lineWatcher struct {
	w    io.Writer
	last string
}

func (l *lineWatcher) progress(j renting.JobRecord) error {
	line := j.ArrayView.Line()
	if line == l.last {
		return nil
	}
	l.last = line
	_, err := fmt.Fprintln(l.w, line)
	return err
}

func (l *lineWatcher) final(j renting.JobRecord) error { return l.progress(j) }

// ArrayProgress is one object of job run --json's stream for an array.
type ArrayProgress struct {
	Type         string             `json:"type"` // "progress", or "final" for the last
	ID           string             `json:"id"`
	State        string             `json:"state"`
	Shards       int                `json:"shards"`
	Done         int                `json:"done"`
	Running      int                `json:"running"` // in flight: leased, starting, or in a first auction
	Reauctioning int                `json:"reauctioning"`
	Waiting      int                `json:"waiting"`
	Failed       int                `json:"failed"`
	Spent        auction.Credits    `json:"spent" doc:"micro-credits (auction.Credits) spent on every shard job so far"`
	ETASeconds   *int64             `json:"eta_s,omitempty"`
	Line         string             `json:"line"`
	Error        string             `json:"error,omitempty"`
	Array        *renting.JobRecord `json:"array,omitempty"` // final only: the array's record, every shard's job with it
}

func arrayProgressOf(j renting.JobRecord, typ string) ArrayProgress {
	v := j.ArrayView
	return ArrayProgress{Type: typ, ID: j.ID, State: j.State, Shards: v.Shards, Done: v.Done, Running: v.Running + v.Auction,
		Reauctioning: v.Reauctioning, Waiting: v.Waiting, Failed: v.Failed, Spent: v.Spent, ETASeconds: v.ETASeconds,
		Line: v.Line(), Error: j.Error}
}

// jsonWatcher writes an ArrayProgress per line each time the progress
// changes, and the final one with the whole record.
type jsonWatcher struct {
	enc  *json.Encoder
	last string
}

func newJSONWatcher(w io.Writer) *jsonWatcher { return &jsonWatcher{enc: json.NewEncoder(w)} }

func (s *jsonWatcher) progress(j renting.JobRecord) error {
	key := j.State + " " + j.ArrayView.Line()
	if key == s.last {
		return nil
	}
	s.last = key
	return s.enc.Encode(arrayProgressOf(j, "progress"))
}

func (s *jsonWatcher) final(j renting.JobRecord) error {
	p := arrayProgressOf(j, "final")
	p.Array = &j
	return s.enc.Encode(p)
}
