// Package modelimage builds the test model server's Docker image FROM
// scratch, so that tests and the demo need no registry. Like demoimage it
// imports nothing of gleaner, so that any package's tests can build it.
package modelimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Tag is the test model server's image.
const Tag = "gleaner-modelserver:dev"

// Port is the port the server listens on in the image unless
// MODELSERVER_PORT says otherwise.
const Port = 8000

// Build builds testnet/modelserver as a static binary and packages it
// FROM scratch as Tag. moduleRoot is the repository root.
func Build(ctx context.Context, moduleRoot string) error {
	dir, err := os.MkdirTemp("", "gleaner-modelserver-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "modelserver"), "./testnet/modelserver")
	build.Dir = moduleRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build modelserver: %v: %s", err, out)
	}
	// Not root: the server needs no privilege, port 8000 included.
	df := fmt.Sprintf("FROM scratch\nCOPY modelserver /modelserver\nUSER 65534:65534\nEXPOSE %d\nENTRYPOINT [\"/modelserver\"]\n", Port)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", Tag, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("docker build %s (is Docker running?): %v: %s", Tag, err, out)
	}
	return nil
}
