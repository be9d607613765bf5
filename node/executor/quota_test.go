package executor

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
)

const tmpfsMagic = 0x01021994 // statfs f_type of a tmpfs

// runProbe starts spec, waits for it to exit 0 and decodes its JSON output.
func runProbe(t *testing.T, d *Docker, spec Spec, out any) Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	j, err := d.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	res, err := j.Wait(ctx)
	if err != nil || res.ExitCode != 0 || res.OOMKilled {
		t.Fatalf("%s: result %+v, %v; output %q", spec.Command, res, err, j.Logs().Bytes())
	}
	if err := json.Unmarshal(j.Logs().Bytes(), out); err != nil {
		t.Fatalf("%s: output %q: %v", spec.Command, j.Logs().Bytes(), err)
	}
	return j
}

type writeResult struct {
	Wrote int64
	Err   string
}

// Every place a job can write stops it at its quota with ENOSPC, for bytes
// and for files: the checkpoint volume, /tmp, /dev/shm and the output
// volume. Each job asks for 4 times its quota, and has memory enough that
// the cgroup is not what stops it.
func TestDockerWriteQuotas(t *testing.T) {
	d := needDocker(t)
	for _, c := range []struct {
		name   string
		args   []string
		set    func(*Spec)
		most   int64 // the quota, in bytes or files
		unit   string
		isFill bool
	}{
		{"checkpoint bytes", []string{"fill", "/ckpt", "32"}, func(s *Spec) { s.CheckpointMiB = 8 }, 8 << 20, "bytes", true},
		{"checkpoint files", []string{"files", "/ckpt", "1024"}, func(s *Spec) { s.CheckpointMiB = 1 }, 256, "files", false},
		{"scratch bytes", []string{"fill", "/tmp", "32"}, func(s *Spec) { s.ScratchMiB = 8 }, 8 << 20, "bytes", true},
		{"scratch files", []string{"files", "/tmp", "1024"}, func(s *Spec) { s.ScratchMiB = 1 }, 256, "files", false},
		{"shm bytes", []string{"fill", "/dev/shm", "32"}, func(s *Spec) { s.ShmMiB = 8 }, 8 << 20, "bytes", true},
		{"output bytes", []string{"fill", "/out", "32"}, func(s *Spec) { s.OutputPath, s.OutputMiB = "/out", 8 }, 8 << 20, "bytes", true},
		{"output files", []string{"files", "/out", "1024"}, func(s *Spec) { s.OutputPath, s.OutputMiB = "/out", 1 }, 256, "files", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := testSpec(t, c.args...)
			spec.MemoryMiB, spec.CheckpointPath = 256, "/ckpt"
			c.set(&spec)
			var r writeResult
			runProbe(t, d, spec, &r)
			t.Logf("%s: wrote %d %s of the %d asked for, then %q", strings.Join(c.args, " "), r.Wrote, c.unit, 4*c.most, r.Err)
			// A tmpfs keeps a little of its size for its own use, so a
			// quota can stop a few files short, never past it.
			if !strings.Contains(r.Err, "no space left on device") || r.Wrote > c.most || r.Wrote < c.most*3/4 {
				t.Fatalf("wrote %d %s (quota %d) and got %q, want ENOSPC at the quota", r.Wrote, c.unit, c.most, r.Err)
			}
		})
	}
}

// The checkpoint that hit its quota survives the job's exit, bounded, on a
// tmpfs of that size: not a byte of it went to the daemon's disk.
func TestDockerCheckpointQuotaHoldsAfterExit(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	spec := testSpec(t, "fill", "/ckpt", "64")
	spec.MemoryMiB, spec.CheckpointPath, spec.CheckpointMiB = 256, "/ckpt", 16
	var r writeResult
	j := runProbe(t, d, spec, &r)
	if !strings.Contains(r.Err, "no space left on device") || r.Wrote > 16<<20 {
		t.Fatalf("job wrote %d bytes past a 16 MiB quota (%q)", r.Wrote, r.Err)
	}
	vol := "gleaner-ckpt-" + spec.JobID
	v, err := d.cli.VolumeInspect(ctx, vol)
	if err != nil {
		t.Fatal(err)
	}
	if v.Options["type"] != "tmpfs" || !strings.Contains(v.Options["o"], "size=16m") {
		t.Fatalf("checkpoint volume options %v", v.Options)
	}
	// The daemon is local here (and in CI): look at what backs the volume.
	var st syscall.Statfs_t
	if err := syscall.Statfs(v.Mountpoint, &st); err != nil {
		if os.Geteuid() == 0 {
			t.Fatalf("statfs %s: %v", v.Mountpoint, err)
		}
		t.Logf("not root: cannot look at %s (%v); the quota was checked from inside", v.Mountpoint, err)
	} else if st.Type != tmpfsMagic || int64(st.Blocks)*st.Bsize != 16<<20 {
		t.Fatalf("after the job exited, %s is fs type %#x of %d bytes, want a 16 MiB tmpfs", v.Mountpoint, st.Type, int64(st.Blocks)*st.Bsize)
	}
	rc, err := j.CopyCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got int64 = -1
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "./") == "fill" {
			got = h.Size
		}
	}
	if got != r.Wrote {
		t.Fatalf("checkpoint after exit holds %d bytes of fill, the job wrote %d", got, r.Wrote)
	}
	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	byJob := filters.NewArgs(filters.Arg("label", LabelJob+"="+spec.JobID))
	vols, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: byJob})
	if err != nil || len(vols.Volumes) != 0 || len(containersOf(t, d, spec.JobID)) != 0 {
		t.Fatalf("left behind after Remove: volumes %v (%v), %d containers", vols.Volumes, err, len(containersOf(t, d, spec.JobID)))
	}
}

// Seen from inside, the job can write to exactly four mounts (the
// checkpoint, /tmp, /dev/shm and the outputs), each a tmpfs of the size the
// spec set: the root filesystem stays read-only, nothing else stores what
// it writes (the kernel's mqueue is bounded by RLIMIT_MSGQUEUE, and Docker
// binds /dev/null over masked paths such as /proc/keys), and nothing
// reaches the daemon's disk.
func TestDockerEveryWritableMountHasAQuota(t *testing.T) {
	d := needDocker(t)
	spec := testSpec(t, "mounts")
	spec.CheckpointPath, spec.CheckpointMiB, spec.ScratchMiB, spec.ShmMiB = "/ckpt", 4, 8, 16
	spec.OutputPath, spec.OutputMiB = "/outputs", 2
	var ms []struct {
		Path, FSType, Options string
		SizeBytes             int64
		CharDevice            bool
	}
	runProbe(t, d, spec, &ms)
	want := map[string]int64{"/ckpt": 4 << 20, "/tmp": 8 << 20, "/dev/shm": 16 << 20, "/outputs": 2 << 20}
	seen := map[string]bool{}
	for _, m := range ms {
		t.Logf("writable: %s %s %s (%d bytes, device %v)", m.Path, m.FSType, m.Options, m.SizeBytes, m.CharDevice)
		switch size, ok := want[m.Path]; {
		case m.FSType == "mqueue", m.CharDevice: // kernel-bounded; /dev/null over masked paths
		case !ok:
			t.Errorf("%s (%s) is writable and not one of the job's quota mounts", m.Path, m.FSType)
		case m.FSType != "tmpfs" || m.SizeBytes != size:
			t.Errorf("%s is %s of %d bytes, want a tmpfs of %d", m.Path, m.FSType, m.SizeBytes, size)
		default:
			seen[m.Path] = true
		}
	}
	for p := range want {
		if !seen[p] {
			t.Errorf("%s is not writable with its quota", p)
		}
	}
}

// A checkpoint taken on one provider resumes on the next: restored into the
// held volume of the created container before it starts, read by the job,
// written anew, and copied out after it exits.
func TestDockerCheckpointRestoreRoundTrip(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	first := testSpec(t, "trap")
	first.CheckpointPath = "/ckpt"
	j, err := d.Start(ctx, first, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	waitForLog(t, j, "ready")
	if err := j.Stop(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ckpt := copyAll(t, j)

	second := testSpec(t, "resume")
	second.CheckpointPath, second.Restore = "/ckpt", ckpt
	j2, err := d.Start(ctx, second, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j2)
	if res, err := j2.Wait(ctx); err != nil || res.ExitCode != 0 {
		t.Fatalf("resumed job: %+v %v; output %q", res, err, j2.Logs().Bytes())
	}
	if got := string(j2.Logs().Bytes()); got != "resumed step=42\n" {
		t.Fatalf("resumed job saw %q", got)
	}
	if got := tarFile(t, copyAll(t, j2), "state"); got != "step=43\n" {
		t.Fatalf("second checkpoint %q", got)
	}
}

// A checkpoint bigger than the quota is refused at Start (it could not have
// been written under the quota), and nothing of the job stays behind.
func TestDockerRestoreOverQuotaFails(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	big := make([]byte, 3<<20)
	tw.WriteHeader(&tar.Header{Name: "./state", Mode: 0o600, Size: int64(len(big)), ModTime: time.Unix(0, 0)})
	tw.Write(big)
	tw.Close()
	spec := testSpec(t, "resume")
	spec.CheckpointPath, spec.CheckpointMiB, spec.Restore = "/ckpt", 2, buf.Bytes()
	j, err := d.Start(ctx, spec, Hooks{})
	if err == nil {
		cleanupJob(t, j)
		t.Fatalf("a 3 MiB checkpoint was restored under a 2 MiB quota; output %q", j.Logs().Bytes())
	}
	t.Logf("refused: %v", err)
	if !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("error %q, want ENOSPC", err)
	}
	byJob := filters.NewArgs(filters.Arg("label", LabelJob+"="+spec.JobID))
	vols, _ := d.cli.VolumeList(ctx, volume.ListOptions{Filters: byJob})
	if n := len(containersOf(t, d, spec.JobID)); n != 0 || len(vols.Volumes) != 0 {
		t.Fatalf("a refused start left %d containers and volumes %v", n, vols.Volumes)
	}
}

func copyAll(t *testing.T, j Job) []byte {
	t.Helper()
	rc, err := j.CopyCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func tarFile(t *testing.T, data []byte, name string) string {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("no %s in checkpoint tar: %v", name, names)
		} else if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if strings.TrimPrefix(h.Name, "./") == name {
			b, _ := io.ReadAll(tr)
			return string(b)
		}
	}
}

// The holder's program is a well-formed static executable for each
// architecture (the Docker tests run the amd64 one for real).
func TestHolderProgram(t *testing.T) {
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		prog, err := holderProgram(arch)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(prog))
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if f.Machine != machine || f.Type != elf.ET_EXEC || len(f.Progs) != 1 {
			t.Fatalf("%s: machine %v type %v %d program headers", arch, f.Machine, f.Type, len(f.Progs))
		}
		p := f.Progs[0]
		if p.Type != elf.PT_LOAD || p.Flags != elf.PF_R|elf.PF_X || p.Off != 0 || p.Filesz != uint64(len(prog)) ||
			f.Entry != p.Vaddr+64+56 || p.Vaddr%p.Align != 0 {
			t.Fatalf("%s: program header %+v, entry %#x", arch, p.ProgHeader, f.Entry)
		}
	}
	if _, err := holderProgram("riscv64"); err == nil {
		t.Fatal("no error for an architecture without a holder")
	}
}
