package testnet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// DemoImage is the tag of the demo workload's image.
const DemoImage = "gleaner-demojob:1"

// BuildDemoImage builds testnet/demojob as a static binary and packages it
// FROM scratch, so that tests and the demo need no registry. moduleRoot is
// the repository root.
func BuildDemoImage(ctx context.Context, moduleRoot string) error {
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
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", DemoImage, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("docker build %s (is Docker running?): %v: %s", DemoImage, err, out)
	}
	return nil
}
