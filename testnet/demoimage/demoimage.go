// Package demoimage builds the demo workload's Docker image FROM scratch,
// so that tests and the demo need no registry. It imports nothing of
// gleaner, so that node's own tests can build the image without the
// testnet package (which imports node).
package demoimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Tag is the demo workload's image.
const Tag = "gleaner-demojob:1"

// Build builds testnet/demojob as a static binary and packages it FROM
// scratch as Tag. moduleRoot is the repository root.
func Build(ctx context.Context, moduleRoot string) error {
	dir, err := os.MkdirTemp("", "gleaner-demojob-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "demojob"), "./testnet/demojob")
	build.Dir = moduleRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build demojob: %v: %s", err, out)
	}
	df := "FROM scratch\nCOPY demojob /demojob\nENTRYPOINT [\"/demojob\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", Tag, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("docker build %s (is Docker running?): %v: %s", Tag, err, out)
	}
	return nil
}
