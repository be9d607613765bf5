package executor

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
)

// entry is one tar entry for the tests' trees: a regular file unless hdr
// says otherwise.
type entry struct {
	hdr  tar.Header
	body string
}

func file(name, body string) entry {
	return entry{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(body))}, body}
}

func dir(name string) entry {
	return entry{tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o700}, ""}
}

func tarBytes(t testing.TB, es ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := e.hdr
		h.ModTime = time.Unix(1700000000, 0)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarFunc is an Input.Tar that writes data, counting its calls in calls.
func tarFunc(data []byte, calls *atomic.Int32) func(context.Context, io.Writer) error {
	return func(ctx context.Context, w io.Writer) error {
		if calls != nil {
			calls.Add(1)
		}
		_, err := w.Write(data)
		return err
	}
}

// checked runs data through the check as an input of limit bytes, read to
// the end, and returns the checked tar.
func checked(data []byte, limit int64) ([]byte, error) {
	var out []byte
	err := readInput(context.Background(), Input{Target: "/data", Tar: tarFunc(data, nil), Bytes: limit},
		func(r io.Reader) (err error) { out, err = io.ReadAll(r); return err })
	return out, err
}

func TestInputTarRefusesEscapes(t *testing.T) {
	good := tarBytes(t, file("ok", strings.Repeat("x", 100)))
	for _, c := range []struct {
		name  string
		data  []byte
		limit int64
		want  string
	}{
		{"parent", tarBytes(t, file("../x", "evil")), 100, `"../x" escapes the tree`},
		{"nested parent", tarBytes(t, dir("a/"), file("a/../../x", "evil")), 100, `"a/../../x" escapes the tree`},
		{"absolute", tarBytes(t, file("/abs", "evil")), 100, `"/abs" is absolute`},
		{"not clean", tarBytes(t, file("a//b", "x")), 100, `"a//b": the name is not clean`},
		{"symlink", tarBytes(t, entry{tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, ""}), 100, `"l" is a symlink`},
		{"hard link", tarBytes(t, file("a", "x"), entry{tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "a"}, ""}), 100, `"h" is a hard link`},
		{"device", tarBytes(t, entry{tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}, ""}), 100, `"null" is a device`},
		{"fifo", tarBytes(t, entry{tar.Header{Name: "p", Typeflag: tar.TypeFifo}, ""}), 100, `"p" is a fifo`},
		{"one file over Bytes", tarBytes(t, file("big", strings.Repeat("x", 11))), 10, `"big": the tree is over its declared 10 bytes`},
		{"files over Bytes together", tarBytes(t, file("a", "123456"), file("b", "123456")), 10, `"b": the tree is over its declared 10 bytes`},
		{"not a tar", bytes.Repeat([]byte("garbage!"), 200), 100, "not a tar stream"},
		{"truncated", good[:512+50], 1000, `entry "ok": unexpected EOF`},
		{"data after the end", append(slices.Clone(good), bytes.Repeat([]byte{1}, maxTrailing+1)...), 1000, "after the end of the archive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := checked(c.data, c.limit)
			if !errors.Is(err, ErrBadInputTar) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrBadInputTar with %q", err, c.want)
			}
			// Nothing of a refused stream makes a whole archive: the
			// consumer fails too, so no half tree is taken for the input.
			if len(out) >= 1024 && bytes.Equal(out[len(out)-1024:], make([]byte, 1024)) {
				t.Fatalf("a refused stream ended as a complete archive (%d bytes)", len(out))
			}
		})
	}
}

// What goes through is a tar of fresh headers: names without "./", modes
// for everyone to read, root's, no extended records; the root entry is
// dropped, contents are kept, and up to maxTrailing bytes of padding after
// the archive are fine.
func TestInputTarNormalises(t *testing.T) {
	x := file("./a/run.sh", "#!/bin/sh\n")
	x.hdr.Mode, x.hdr.Uid, x.hdr.Uname = 0o4777, 1000, "alice"
	x.hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": "evil"}
	data := tarBytes(t, dir("./"), dir("./a/"), file("./a/b.txt", "hello"), x, file("c", ""))
	data = append(data, make([]byte, 10240)...)
	out, err := checked(data, 15)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(out))
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || len(h.PAXRecords) != 0 {
			t.Errorf("%s: owner %d:%d %q, PAX %v", h.Name, h.Uid, h.Gid, h.Uname, h.PAXRecords)
		}
		got = append(got, fmt.Sprintf("%s %o %q", h.Name, h.Mode, body))
	}
	want := []string{`a/ 755 ""`, `a/b.txt 644 "hello"`, `a/run.sh 755 "#!/bin/sh\n"`, `c 644 ""`}
	if !slices.Equal(got, want) {
		t.Fatalf("checked tar\n%q\nwant\n%q", got, want)
	}
}

// The error of a failed input is Tar's own (not what the pipe made of
// it), a panic is an error, and a consumer that fails is heard.
func TestInputReadErrors(t *testing.T) {
	boom := errors.New("block store: chunk missing")
	in := Input{Target: "/data", Bytes: 100, Tar: func(ctx context.Context, w io.Writer) error {
		w.Write(tarBytes(t, file("a", "x"))[:512])
		return boom
	}}
	err := readInput(context.Background(), in, func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err })
	if !errors.Is(err, boom) || errors.Is(err, ErrBadInputTar) {
		t.Fatalf("failing Tar: %v, want %v", err, boom)
	}

	in.Tar = func(context.Context, io.Writer) error { panic("oops") }
	if err := readInput(context.Background(), in, func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err }); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("panicking Tar: %v", err)
	}

	// A Tar that blocks until its context ends is stopped once the
	// consumer gives up, whose error is the answer.
	full := errors.New("disk full")
	in.Tar = func(ctx context.Context, w io.Writer) error {
		if _, err := w.Write(tarBytes(t, file("a", "x"))[:512]); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}
	if err := readInput(context.Background(), in, func(r io.Reader) error { return full }); !errors.Is(err, full) {
		t.Fatalf("failing consumer: %v, want %v", err, full)
	}
	// One that stops reading early, without an error, fails all the same.
	in.Tar = tarFunc(tarBytes(t, file("a", strings.Repeat("x", 90))), nil)
	if err := readInput(context.Background(), in, func(r io.Reader) error { _, err := r.Read(make([]byte, 10)); return err }); !errors.Is(err, errInputAbandoned) {
		t.Fatalf("consumer that stopped early: %v, want errInputAbandoned", err)
	}
}

func TestInputSpecValidation(t *testing.T) {
	tf := tarFunc(nil, nil)
	in := func(target string) Input { return Input{Target: target, Tar: tf, Bytes: 1} }
	base := Spec{JobID: "j", CPUs: 1, MemoryMiB: 1, Pids: 1}
	for _, ok := range [][]Input{
		{in("/data")},
		{in("/data"), in("/data2"), in("/devices"), in("/etcetera"), in("/models/a"), in("/models/b"), in("/ckpt2")},
	} {
		s := base
		s.Inputs, s.CheckpointPath = ok, "/ckpt"
		if err := s.validate(); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	many := make([]Input, MaxInputs+1)
	for i := range many {
		many[i] = in(fmt.Sprintf("/in%d", i))
	}
	for _, c := range []struct {
		name   string
		inputs []Input
		ckpt   string
		want   string
	}{
		{"too many", many, "", "17 inputs, at most 16"},
		{"relative", []Input{in("data")}, "", `input 0 ("data"): target must be an absolute, clean path`},
		{"trailing slash", []Input{in("/data/")}, "", `input 0 ("/data/"): target must be an absolute, clean path`},
		{"dot dot", []Input{in("/data/../etc")}, "", `input 0 ("/data/../etc"): target must be an absolute, clean path`},
		{"root", []Input{in("/")}, "", `input 0 ("/"): target must not be /`},
		{"tmp", []Input{in("/tmp")}, "", `input 0 ("/tmp"): target overlaps the reserved path /tmp`},
		{"in tmp", []Input{in("/tmp/data")}, "", `input 0 ("/tmp/data"): target overlaps the reserved path /tmp`},
		{"dev", []Input{in("/dev")}, "", `target overlaps the reserved path /dev`},
		{"in shm", []Input{in("/dev/shm/x")}, "", `input 0 ("/dev/shm/x"): target overlaps the reserved path /dev`},
		{"proc", []Input{in("/proc/x")}, "", `target overlaps the reserved path /proc`},
		{"sys", []Input{in("/sys")}, "", `target overlaps the reserved path /sys`},
		{"etc", []Input{in("/etc/ssl")}, "", `target overlaps the reserved path /etc`},
		{"checkpoint", []Input{in("/ckpt")}, "/ckpt", `input 0 ("/ckpt"): target overlaps the checkpoint path /ckpt`},
		{"in checkpoint", []Input{in("/ckpt/data")}, "/ckpt/", `target overlaps the checkpoint path /ckpt`},
		{"over checkpoint", []Input{in("/job")}, "/job/ckpt", `input 0 ("/job"): target overlaps the checkpoint path /job/ckpt`},
		{"same target", []Input{in("/data"), in("/data")}, "", `input 1 ("/data"): target overlaps input 0 ("/data")`},
		{"nested in another", []Input{in("/data"), in("/data/b")}, "", `input 1 ("/data/b"): target overlaps input 0 ("/data")`},
		{"over another", []Input{in("/m/a/b"), in("/m/a")}, "", `input 1 ("/m/a"): target overlaps input 0 ("/m/a/b")`},
		{"no tar", []Input{in("/data"), {Target: "/more", Bytes: 1}}, "", `input 1 ("/more"): no Tar`},
		{"no bytes", []Input{{Target: "/data", Tar: tf}}, "", `input 0 ("/data"): declared size 0, must be > 0`},
		{"negative bytes", []Input{{Target: "/data", Tar: tf, Bytes: -5}}, "", `declared size -5, must be > 0`},
	} {
		s := base
		s.Inputs, s.CheckpointPath = c.inputs, c.ckpt
		err := s.validate()
		if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBadSpec with %q", c.name, err, c.want)
		}
	}
}

// The job mounts its inputs read-only at their targets and is told where.
func TestInputContainerConfig(t *testing.T) {
	s := Spec{JobID: "j1", Image: "img", CPUs: 1, MemoryMiB: 64, Pids: 10, CheckpointPath: "/ckpt",
		Inputs: []Input{{Target: "/data", Bytes: 1}, {Target: "/models", Bytes: 1}}}
	cfg, hc := containerConfig(&s)
	var got []string
	for _, m := range hc.Mounts {
		if m.Type != mount.TypeVolume || m.VolumeOptions == nil || !m.VolumeOptions.NoCopy {
			t.Errorf("mount %+v", m)
		}
		got = append(got, fmt.Sprintf("%s:%s:%v", m.Source, m.Target, m.ReadOnly))
	}
	want := []string{"gleaner-ckpt-j1:/ckpt:false", "gleaner-in-j1-0:/data:true", "gleaner-in-j1-1:/models:true"}
	if !slices.Equal(got, want) {
		t.Fatalf("mounts %v, want %v", got, want)
	}
	if !slices.Contains(cfg.Env, "GLEANER_INPUT_0=/data") || !slices.Contains(cfg.Env, "GLEANER_INPUT_1=/models") {
		t.Fatalf("env %v", cfg.Env)
	}
}

// volumesOf lists the volumes labelled with the job.
func volumesOf(t testing.TB, d *Docker, jobID string) []string {
	t.Helper()
	vols, err := d.cli.VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelJob+"="+jobID))})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vols.Volumes {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return names
}

func TestDockerInputMountedReadOnly(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	var calls atomic.Int32
	spec := testSpec(t, "input", "/data/a/b.txt", "/data")
	spec.CheckpointPath = "/ckpt" // with a holder and its tmpfs volume too
	spec.Inputs = []Input{
		{Target: "/data", Bytes: 64, Tar: tarFunc(tarBytes(t, dir("a/"), file("a/b.txt", "hello input\n")), &calls)},
		{Target: "/models", Bytes: 64, Tar: tarFunc(tarBytes(t, file("m", "weights")), &calls)},
	}
	var r inputResult
	j := runProbe(t, d, spec, &r)
	if r.Read != "hello input\n" || r.ReadErr != "" {
		t.Fatalf("the job read %q (%s) from its input", r.Read, r.ReadErr)
	}
	if !strings.Contains(r.WriteErr, "read-only file system") {
		t.Fatalf("writing into the input: %q, want a read-only file system", r.WriteErr)
	}
	if r.Env != "/data" || calls.Load() != 2 {
		t.Fatalf("GLEANER_INPUT_0=%q, Tar called %d times", r.Env, calls.Load())
	}
	// Disk-backed volumes of the job's; the filler is gone.
	for _, name := range []string{"gleaner-in-" + spec.JobID + "-0", "gleaner-in-" + spec.JobID + "-1"} {
		v, err := d.cli.VolumeInspect(ctx, name)
		if err != nil || v.Driver != "local" || len(v.Options) != 0 || v.Labels[LabelJob] != spec.JobID {
			t.Fatalf("input volume %s: %+v %v", name, v, err)
		}
	}
	for _, c := range containersOf(t, d, spec.JobID) {
		if c.Labels[LabelRole] == roleFiller {
			t.Fatalf("the filler %s outlived the fill", c.Names)
		}
	}
	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if vols, n := volumesOf(t, d, spec.JobID), len(containersOf(t, d, spec.JobID)); len(vols) != 0 || n != 0 {
		t.Fatalf("left after Remove: volumes %v, %d containers", vols, n)
	}
}

// inputResult is what the probe's input mode reports.
type inputResult struct {
	Read, ReadErr, WriteErr, Env string
}

// A provider that restarts adopts a job with inputs: the job reads them
// on, they are neither filled again nor removed by the adoption, and
// Remove of the adopted job deletes them.
func TestDockerInputSurvivesAdopt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	owner := testOwner(t, "a", "one")
	before := ownedDocker(t, owner)
	var calls atomic.Int32
	spec := testSpec(t, "watch", "/data/f", "300", "100") // up to 30 s
	spec.CheckpointPath = "/ckpt"
	spec.Inputs = []Input{{Target: "/data", Bytes: 16, Tar: tarFunc(tarBytes(t, file("f", "payload")), &calls)}}
	j, err := before.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	leaveNothing(t, owner, spec.JobID)
	waitForLog(t, j, "read 2: payload")
	crash(before, j)

	after := ownedDocker(t, owner)
	a, err := after.Adopt(ctx, spec.JobID)
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, a)
	vol := inputVolume(spec.JobID, 0)
	if rs := a.(*dockerJob).rs; !slices.Contains(rs.volumes, vol) {
		t.Fatalf("adopted job's volumes %v lack its input %s", rs.volumes, vol)
	}
	waitForLog(t, a, ": payload") // read after the adoption: its logs start there
	if n := calls.Load(); n != 1 {
		t.Fatalf("Tar called %d times, want once", n)
	}
	if err := a.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if vols, n := volumesOf(t, after, spec.JobID), len(containersOf(t, after, spec.JobID)); len(vols) != 0 || n != 0 {
		t.Fatalf("left after Remove: volumes %v, %d containers", vols, n)
	}
}

// A failed fill fails the call that creates the job, with Tar's error or
// the check's, and leaves nothing of the job: no container, no volume,
// including the inputs filled before the failing one.
func TestDockerInputTarFails(t *testing.T) {
	d := needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	boom := errors.New("block store: chunk missing")
	good := Input{Target: "/ok", Bytes: 16, Tar: tarFunc(tarBytes(t, file("f", "fine")), nil)}
	for _, c := range []struct {
		name  string
		start bool // Start rather than Create
		in    Input
		want  error
	}{
		{"tar error on Create", false, Input{Target: "/data", Bytes: 100, Tar: func(ctx context.Context, w io.Writer) error {
			w.Write(tarBytes(t, file("a", "x"))[:1024]) // a whole entry, then the failure
			return boom
		}}, boom},
		{"symlink on Start", true, Input{Target: "/data", Bytes: 100, Tar: tarFunc(tarBytes(t,
			entry{tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}, ""}), nil)}, ErrBadInputTar},
		{"over Bytes on Create", false, Input{Target: "/data", Bytes: 10, Tar: tarFunc(tarBytes(t, file("big", strings.Repeat("x", 4096))), nil)}, ErrBadInputTar},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := testSpec(t, "hello")
			spec.CheckpointPath = "/ckpt"
			spec.Inputs = []Input{good, c.in}
			var j Job
			var err error
			if c.start {
				j, err = d.Start(ctx, spec, Hooks{})
			} else {
				j, err = d.Create(ctx, spec, Hooks{})
			}
			if err == nil {
				cleanupJob(t, j)
				t.Fatal("a job whose input failed was created")
			}
			t.Logf("refused: %v", err)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "input 1 (/data") {
				t.Fatalf("error %v, want %v naming input 1", err, c.want)
			}
			if vols, n := volumesOf(t, d, spec.JobID), len(containersOf(t, d, spec.JobID)); len(vols) != 0 || n != 0 {
				t.Fatalf("a failed fill left volumes %v and %d containers", vols, n)
			}
		})
	}
}
