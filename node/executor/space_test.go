//go:build linux || darwin

package executor

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// DiskFree on the real filesystem (statfs): what an unprivileged writer
// may still write, no more than the filesystem's size, and an error for
// a path that does not exist.
func TestDiskFreeIsStatfs(t *testing.T) {
	dir := t.TempDir()
	free, err := DiskFree(dir)
	if err != nil {
		t.Fatal(err)
	}
	var s syscall.Statfs_t
	if err := syscall.Statfs(dir, &s); err != nil {
		t.Fatal(err)
	}
	size := int64(s.Blocks) * int64(s.Bsize)
	if free <= 0 || free > size {
		t.Fatalf("DiskFree %d, want more than 0 and at most the filesystem's %d bytes", free, size)
	}
	// It moves with what is written (by at least most of 64 MiB, give or
	// take what others write meanwhile), so it is this filesystem's.
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for range 64 {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	after, err := DiskFree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if free-after < 32<<20 {
		t.Logf("free before %d, after 64 MiB written %d: the filesystem may compress or others freed space", free, after)
	}
	if _, err := DiskFree(filepath.Join(dir, "no", "such")); err == nil {
		t.Error("DiskFree of a path that does not exist gave no error")
	}
}

// The process executor's inputs go under its root.
func TestProcessInputSpace(t *testing.T) {
	p, err := NewProcess("local")
	if err != nil {
		t.Fatal(err)
	}
	free, ok, err := p.InputSpace(context.Background())
	if err != nil || !ok || free <= 0 {
		t.Fatalf("InputSpace: %d, %v, %v", free, ok, err)
	}
}

// The Docker executor's, where the engine keeps its volumes, when it is
// on this machine.
func TestDockerInputSpace(t *testing.T) {
	d := needDocker(t)
	free, ok, err := d.InputSpace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	info, err := d.cli.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, serr := os.Stat(info.DockerRootDir); serr == nil {
		if want, _ := DiskFree(info.DockerRootDir); !ok || free <= 0 || abs(free-want) > 1<<30 {
			t.Fatalf("InputSpace %d (%v), want about %d, the free space of %s", free, ok, want, info.DockerRootDir)
		}
	} else if ok {
		t.Fatalf("InputSpace %d, known, of an engine whose root %s is not on this machine", free, info.DockerRootDir)
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
