//go:build unix

package executor

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The process executor unpacks an input into the job's work directory,
// checked as under Docker, and says where in GLEANER_INPUT_N.
func TestProcessInput(t *testing.T) {
	p, err := NewProcess("local")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := testSpec(t)
	spec.Command = []string{"/bin/sh", "-c", `printf '%s|' "$GLEANER_INPUT_0"; cat "$GLEANER_INPUT_0/a/b.txt" "$GLEANER_INPUT_1/m"`}
	spec.Inputs = []Input{
		{Target: "/data", Bytes: 64, Tar: tarFunc(tarBytes(t, dir("./a/"), file("./a/b.txt", "hello input\n")), nil)},
		{Target: "/models", Bytes: 64, Tar: tarFunc(tarBytes(t, file("m", "weights\n")), nil)},
	}
	j, err := p.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	res, err := j.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v; logs %q", res, err, j.Logs().Bytes())
	}
	work := filepath.Join(p.root, spec.JobID)
	want := unsafeBanner + filepath.Join(work, "inputs", "0") + "|hello input\nweights\n"
	if got := string(j.Logs().Bytes()); got != want {
		t.Fatalf("logs %q, want %q", got, want)
	}
	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Fatalf("work directory survived Remove: %v", err)
	}

	// A hostile input is refused before the job starts, and its work
	// directory goes.
	bad := testSpec(t)
	bad.Command = []string{"/bin/true"}
	bad.Inputs = []Input{{Target: "/data", Bytes: 64, Tar: tarFunc(tarBytes(t,
		entry{tar.Header{Name: "x", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, ""}), nil)}}
	if j, err := p.Start(ctx, bad, Hooks{}); err == nil {
		cleanupJob(t, j)
		t.Fatal("a job with a symlink in its input started")
	} else if !errors.Is(err, ErrBadInputTar) || !strings.Contains(err.Error(), "input 0 (/data") {
		t.Fatalf("hostile input: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.root, bad.JobID)); !os.IsNotExist(err) {
		t.Fatalf("a refused job's work directory is left: %v", err)
	}
}
