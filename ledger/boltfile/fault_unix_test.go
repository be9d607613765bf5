//go:build unix

package boltfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// What bbolt does with a cut-short file, done by hand: map a file, cut it,
// read past the new end. guard turns the SIGBUS into an error.
func TestGuardTurnsAFaultIntoAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	ps := os.Getpagesize()
	if err := os.WriteFile(path, make([]byte, 4*ps), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 4*ps, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if err := os.Truncate(path, int64(ps)); err != nil {
		t.Fatal(err)
	}
	var sink byte
	p := guard(func() { sink = mem[3*ps] })
	if !strings.Contains(p, "faulted") {
		t.Fatalf("guard = %q (read %d), want a fault", p, sink)
	}
	if p := guard(func() { panic("boom") }); p != "boom" {
		t.Fatalf("guard(panic) = %q", p)
	}
	if p := guard(func() {}); p != "" {
		t.Fatalf("guard(nothing) = %q", p)
	}
}
