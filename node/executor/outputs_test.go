package executor

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
)

// outputFiles are what the tests' jobs write to their outputs: names
// (nested directories included) and sizes.
var outputFiles = map[string]int{"a.txt": 10, "sub/b.bin": 70000, "sub/deeper/c": 0, "d/e/f.dat": 5000}

// writeArgs is the probe's command to write files into dir ("-" for
// $GLEANER_OUTPUTS), then exit or hold until SIGTERM.
func writeArgs(dir, then string, files map[string]int) []string {
	args := []string{"write", dir, then}
	for _, name := range slices.Sorted(mapKeys(files)) {
		args = append(args, fmt.Sprintf("%s=%d", name, files[name]))
	}
	return args
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// fileContent is testdata/probe's FileContent.
func fileContent(name string, size int) []byte {
	unit := name + "|"
	return []byte(strings.Repeat(unit, size/len(unit)+1)[:size])
}

// treeResult is what the probe's write mode reports.
type treeResult struct {
	Dir   string
	Wrote int64
	Err   string
}

// treeEntry is one entry of an outputs tar.
type treeEntry struct {
	typ  byte
	size int64 // as the header says
	body string
}

// readTree reads all of a CopyOutputs stream: each entry's type and
// contents by its name, which must be "./"-relative.
func readTree(t *testing.T, j Job) map[string]treeEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, err := j.CopyOutputs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tree := map[string]treeEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return tree
		} else if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Name, "./") {
			t.Fatalf("output entry %q is not ./-relative", h.Name)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		tree[h.Name] = treeEntry{h.Typeflag, h.Size, string(body)}
	}
}

// checkTree fails unless tree holds exactly want's files, with their
// bytes, and no more than the directories they need.
func checkTree(t *testing.T, tree map[string]treeEntry, want map[string]int) {
	t.Helper()
	dirs := map[string]bool{"./": true}
	for name := range want {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs["./"+d+"/"] = true
		}
	}
	var names []string
	for name, e := range tree {
		names = append(names, name)
		switch e.typ {
		case tar.TypeDir:
			if !dirs[name] {
				t.Errorf("output directory %q, not one the files need", name)
			}
		case tar.TypeReg:
			rel := strings.TrimPrefix(name, "./")
			size, ok := want[rel]
			if !ok {
				t.Errorf("output file %q was not written by the job", name)
			} else if e.body != string(fileContent(rel, size)) || e.size != int64(size) {
				t.Errorf("output file %q holds %d bytes (header %d), not the %d the job wrote", name, len(e.body), e.size, size)
			}
		default:
			t.Errorf("output entry %q of type %q", name, e.typ)
		}
	}
	for name := range want {
		if _, ok := tree["./"+name]; !ok {
			t.Errorf("output file %s is missing", name)
		}
	}
	sort.Strings(names)
	t.Logf("output tar: %v", names)
}

// A job writes files in nested directories to its outputs and exits; they
// are copied out whole, and after Remove nothing of the job is left. A
// created job that has not begun has its (empty) outputs already, and its
// memory limit has room for them.
func TestDockerOutputCopiedAfterExit(t *testing.T) {
	d := needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := testSpec(t, writeArgs("-", "exit", outputFiles)...) // "-": where GLEANER_OUTPUTS says
	spec.OutputPath, spec.OutputMiB = "/outputs", 4
	c, err := d.Create(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, c)
	checkTree(t, readTree(t, c), nil)
	info, err := d.cli.ContainerInspect(ctx, c.(*dockerJob).id)
	if err != nil {
		t.Fatal(err)
	}
	if hc := info.HostConfig; hc.Memory != (64+4)<<20 || hc.MemorySwap != hc.Memory || !hc.ReadonlyRootfs {
		t.Fatalf("memory %d (swap %d), read-only root %v: want 68 MiB, MemoryMiB and OutputMiB, and a read-only root",
			hc.Memory, hc.MemorySwap, hc.ReadonlyRootfs)
	}
	if err := c.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("result %+v, %v; output %q", res, err, c.Logs().Bytes())
	}
	var r treeResult
	if err := json.Unmarshal(c.Logs().Bytes(), &r); err != nil {
		t.Fatalf("output %q: %v", c.Logs().Bytes(), err)
	}
	if r.Dir != "/outputs" || r.Err != "" || r.Wrote != 75010 {
		t.Fatalf("the job wrote %d bytes to %q (%s), want all to %s=/outputs", r.Wrote, r.Dir, r.Err, EnvOutputs)
	}
	checkTree(t, readTree(t, c), outputFiles)
	checkTree(t, readTree(t, c), outputFiles) // copying takes nothing away

	if err := c.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if vols, n := volumesOf(t, d, spec.JobID), len(containersOf(t, d, spec.JobID)); len(vols) != 0 || n != 0 {
		t.Fatalf("left after Remove: volumes %v, %d containers", vols, n)
	}
	if _, err := d.cli.VolumeInspect(ctx, outputVolume(spec.JobID)); !cerrdefs.IsNotFound(err) {
		t.Fatalf("the output volume after Remove: %v", err)
	}
	if rc, err := c.CopyOutputs(ctx); err == nil {
		rc.Close()
		t.Fatal("outputs copied after Remove")
	}
}

// A job that writes more than OutputMiB gets ENOSPC, and what fit is
// copied out after it exits: no more than the quota, from a tmpfs volume
// of that size.
func TestDockerOutputQuota(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	spec := testSpec(t, "fill", "/outputs", "3")
	spec.OutputPath, spec.OutputMiB = "/outputs", 1
	var r writeResult
	j := runProbe(t, d, spec, &r)
	t.Logf("wrote %d bytes of 3 MiB under a 1 MiB quota, then %q", r.Wrote, r.Err)
	if !strings.Contains(r.Err, "no space left on device") || r.Wrote > 1<<20 || r.Wrote < 3<<18 {
		t.Fatalf("wrote %d bytes and got %q, want ENOSPC at 1 MiB", r.Wrote, r.Err)
	}
	v, err := d.cli.VolumeInspect(ctx, outputVolume(spec.JobID))
	if err != nil {
		t.Fatal(err)
	}
	if v.Options["type"] != "tmpfs" || !strings.Contains(v.Options["o"], "size=1m,") {
		t.Fatalf("output volume options %v, want a 1 MiB tmpfs", v.Options)
	}
	tree := readTree(t, j)
	fill, ok := tree["./fill"]
	if !ok {
		t.Fatalf("no ./fill in the outputs: %v", slices.Collect(mapKeys(tree)))
	}
	if fill.size != r.Wrote || fill.body != string(make([]byte, r.Wrote)) {
		t.Fatalf("outputs hold %d bytes of fill (header %d), the job wrote %d", len(fill.body), fill.size, r.Wrote)
	}
	var total int64
	for _, e := range tree {
		total += int64(len(e.body))
	}
	if total > 1<<20 {
		t.Fatalf("outputs hold %d bytes, over the 1 MiB quota", total)
	}
}

// A provider that crashed while its job ran adopts it, and the outputs,
// kept by the holder meanwhile, are copied out while the job runs and
// after it exits; Remove of the adopted job deletes them.
func TestDockerOutputSurvivesAdopt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	owner := testOwner(t, "a", "one")
	before := ownedDocker(t, owner)
	spec := testSpec(t, writeArgs("/outputs", "hold", outputFiles)...)
	spec.OutputPath, spec.CheckpointPath = "/outputs", "/ckpt" // two volumes held
	j, err := before.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	leaveNothing(t, owner, spec.JobID)
	waitForLog(t, j, `"Dir":"/outputs"`)
	if !strings.Contains(string(j.Logs().Bytes()), `"Err":""`) {
		t.Fatalf("the job failed to write: %q", j.Logs().Bytes())
	}
	crash(before, j)

	after := ownedDocker(t, owner)
	a, err := after.Adopt(ctx, spec.JobID)
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, a)
	if dj := a.(*dockerJob); dj.spec.OutputPath != "/outputs" || !slices.Contains(dj.rs.volumes, outputVolume(spec.JobID)) {
		t.Fatalf("adopted job's output path %q, volumes %v", dj.spec.OutputPath, dj.rs.volumes)
	}
	checkTree(t, readTree(t, a), outputFiles) // while it runs
	if err := a.Stop(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Wait(ctx); err != nil || res.ExitCode != 0 || res.Killed {
		t.Fatalf("adopted job: %+v, %v", res, err)
	}
	checkTree(t, readTree(t, a), outputFiles) // after it exited
	if err := a.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if vols, n := volumesOf(t, after, spec.JobID), len(containersOf(t, after, spec.JobID)); len(vols) != 0 || n != 0 {
		t.Fatalf("left after Remove: volumes %v, %d containers", vols, n)
	}
}

func TestOutputSpecValidation(t *testing.T) {
	in := func(target string) Input { return Input{Target: target, Tar: tarFunc(nil, nil), Bytes: 1} }
	base := Spec{JobID: "j", CPUs: 1, MemoryMiB: 1, Pids: 1}
	for _, ok := range []Spec{
		{OutputPath: "/outputs"},
		{OutputPath: "/outputs", OutputMiB: MaxOutputMiB},
		{OutputPath: "/job/out", CheckpointPath: "/job/ckpt", Inputs: []Input{in("/job/data"), in("/outputs2")}},
		{OutputPath: "/temp", CheckpointPath: "/ckpt/"},
		{OutputPath: "/etcetera"},
		{OutputMiB: 5}, // no outputs: the quota is unused
	} {
		s := base
		s.OutputPath, s.OutputMiB, s.CheckpointPath, s.Inputs = ok.OutputPath, ok.OutputMiB, ok.CheckpointPath, ok.Inputs
		if err := s.validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, c := range []struct {
		name   string
		out    string
		mib    int
		ckpt   string
		inputs []Input
		want   string
	}{
		{"relative", "outputs", 0, "", nil, `output path "outputs" must be an absolute, clean path`},
		{"trailing slash", "/outputs/", 0, "", nil, `output path "/outputs/" must be an absolute, clean path`},
		{"dot dot", "/outputs/../etc", 0, "", nil, `output path "/outputs/../etc" must be an absolute, clean path`},
		{"double slash", "//outputs", 0, "", nil, `output path "//outputs" must be an absolute, clean path`},
		{"root", "/", 0, "", nil, `output path "/" must not be /`},
		{"tmp", "/tmp", 0, "", nil, `output path "/tmp" overlaps the reserved path /tmp`},
		{"in tmp", "/tmp/out", 0, "", nil, `output path "/tmp/out" overlaps the reserved path /tmp`},
		{"in shm", "/dev/shm/out", 0, "", nil, `output path "/dev/shm/out" overlaps the reserved path /dev`},
		{"proc", "/proc", 0, "", nil, `overlaps the reserved path /proc`},
		{"sys", "/sys/out", 0, "", nil, `overlaps the reserved path /sys`},
		{"etc", "/etc", 0, "", nil, `overlaps the reserved path /etc`},
		{"checkpoint", "/ckpt", 0, "/ckpt", nil, `output path "/ckpt" overlaps the checkpoint path /ckpt`},
		{"in checkpoint", "/ckpt/out", 0, "/ckpt/", nil, `output path "/ckpt/out" overlaps the checkpoint path /ckpt`},
		{"over checkpoint", "/job", 0, "/job/ckpt", nil, `output path "/job" overlaps the checkpoint path /job/ckpt`},
		{"input", "/data", 0, "", []Input{in("/data")}, `output path "/data" overlaps input 0 ("/data")`},
		{"in input", "/models/out", 0, "", []Input{in("/data"), in("/models")}, `output path "/models/out" overlaps input 1 ("/models")`},
		{"over input", "/m", 0, "", []Input{in("/m/a/b")}, `output path "/m" overlaps input 0 ("/m/a/b")`},
		{"negative quota", "/outputs", -1, "", nil, "output quota -1 MiB, must be 0..65536"},
		{"quota too big", "/outputs", MaxOutputMiB + 1, "", nil, "output quota 65537 MiB, must be 0..65536"},
		{"negative quota without outputs", "", -1, "", nil, "output quota -1 MiB, must be 0..65536"},
	} {
		s := base
		s.OutputPath, s.OutputMiB, s.CheckpointPath, s.Inputs = c.out, c.mib, c.ckpt, c.inputs
		err := s.validate()
		if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBadSpec with %q", c.name, err, c.want)
		}
	}
}

// The outputs are one more held quota volume, mounted writable at the
// output path, which the job finds in its environment; the memory limit
// grows by their quota, and only for a job that has outputs.
func TestOutputContainerConfig(t *testing.T) {
	s := Spec{JobID: "j1", Image: "img", CPUs: 1, MemoryMiB: 64, Pids: 10, CheckpointPath: "/ckpt", OutputPath: "/outputs",
		Inputs: []Input{{Target: "/data", Bytes: 1}}}
	cfg, hc := containerConfig(&s)
	var got []string
	for _, m := range hc.Mounts {
		got = append(got, fmt.Sprintf("%s:%s:%v", m.Source, m.Target, m.ReadOnly))
	}
	if want := []string{"gleaner-ckpt-j1:/ckpt:false", "gleaner-out-j1:/outputs:false", "gleaner-in-j1-0:/data:true"}; !slices.Equal(got, want) {
		t.Fatalf("mounts %v, want %v", got, want)
	}
	if !slices.Contains(cfg.Env, EnvOutputs+"=/outputs") || !hc.ReadonlyRootfs {
		t.Fatalf("env %v, read-only root %v", cfg.Env, hc.ReadonlyRootfs)
	}
	if vs := s.quotaVolumes(); len(vs) != 2 || vs[1] != (quotaVolume{name: "gleaner-out-j1", target: "/outputs", mib: DefaultOutputMiB}) {
		t.Fatalf("quota volumes %+v", vs)
	}
	for _, c := range []struct {
		out  string
		mib  int
		want int64
	}{{"/outputs", 0, 64 + DefaultOutputMiB}, {"/outputs", 3, 67}, {"", 5, 64}} {
		s.OutputPath, s.OutputMiB = c.out, c.mib
		cfg, hc := containerConfig(&s)
		if hc.Memory != c.want<<20 || hc.MemorySwap != hc.Memory {
			t.Errorf("output %q of %d MiB: memory %d, swap %d, want %d MiB", c.out, c.mib, hc.Memory>>20, hc.MemorySwap>>20, c.want)
		}
		if c.out == "" && slices.ContainsFunc(cfg.Env, func(kv string) bool { return strings.HasPrefix(kv, EnvOutputs+"=") }) {
			t.Errorf("env %v without outputs", cfg.Env)
		}
	}
	if _, err := (&dockerJob{spec: Spec{JobID: "j1"}}).CopyOutputs(context.Background()); !errors.Is(err, ErrNoOutputs) {
		t.Fatalf("CopyOutputs without an output path: %v, want ErrNoOutputs", err)
	}
}
