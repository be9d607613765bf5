//go:build unix

package executor

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProcessOnlyOnLocal(t *testing.T) {
	if _, err := NewProcess("testnet"); !errors.Is(err, ErrUnsafeNetwork) {
		t.Fatalf("NewProcess(testnet): %v", err)
	}
	p, err := NewProcess("local")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Unsafe() || p.Kind() != "process" {
		t.Fatal("the process executor must say it is unsafe")
	}
}

func TestProcessHashesStdoutOnly(t *testing.T) {
	p, err := NewProcess("local")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := testSpec(t)
	spec.Command = []string{"/bin/sh", "-c", "echo answer 42; echo noise >&2"}
	j, err := p.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	res, err := j.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%x", sha256.Sum256([]byte("answer 42\n"))); res.StdoutSHA256 != want {
		t.Fatalf("stdout hash %q, want %q (of stdout alone); logs %q", res.StdoutSHA256, want, j.Logs().Bytes())
	}
}

func TestProcessStopCheckpointsAndRemoves(t *testing.T) {
	if err := buildProbe(); err != nil {
		t.Fatal(err)
	}
	p, err := NewProcess("local")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := testSpec(t)
	spec.Command = []string{probeBin, "trap"}
	spec.CheckpointPath = "/ckpt"
	j, err := p.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	waitForLog(t, j, "ready")
	if err := j.Stop(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := j.Wait(ctx)
	if err != nil || res.ExitCode != 0 || !res.Stopped || res.Killed {
		t.Fatalf("%+v %v; logs %q", res, err, j.Logs().Bytes())
	}
	if !strings.HasPrefix(string(j.Logs().Bytes()), unsafeBanner) {
		t.Fatalf("logs do not start with the unsafe banner: %q", j.Logs().Bytes())
	}
	rc, err := j.CopyCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	found := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if hdr.Name == "./state" {
			data, _ := io.ReadAll(tr)
			found = string(data) == "step=42\n"
		}
	}
	rc.Close()
	if !found {
		t.Fatal("checkpoint tar lacks ./state")
	}
	if err := j.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(p.root, spec.JobID)); !os.IsNotExist(err) {
		t.Fatalf("work directory survived Remove: %v", err)
	}
}
