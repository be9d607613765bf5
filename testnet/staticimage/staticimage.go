// Package staticimage packages one of the repo's Go programs as a Docker
// image FROM scratch: a static binary and nothing else, so tests and the
// demo need no registry and pull nothing.
package staticimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Image is what to build: the main package (relative to the module root),
// the image's tag, and Dockerfile lines after the COPY (USER, EXPOSE...).
type Image struct {
	Package string // "./testnet/demojob"
	Tag     string // "gleaner-demojob:1"
	Extra   string // e.g. "USER 65534:65534\nEXPOSE 8000\n"; "" for none
}

// Build builds img.Package with CGO off for linux and this machine's
// architecture, and `docker build`s it FROM scratch as img.Tag, with the
// binary at /<base name> as the entrypoint. moduleRoot is the repository
// root.
func Build(ctx context.Context, moduleRoot string, img Image) error {
	bin := filepath.Base(img.Package)
	dir, err := os.MkdirTemp("", "gleaner-"+bin+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, bin), img.Package)
	build.Dir = moduleRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v: %s", bin, err, out)
	}
	df := fmt.Sprintf("FROM scratch\nCOPY %s /%s\n%sENTRYPOINT [\"/%s\"]\n", bin, bin, img.Extra, bin)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", img.Tag, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("docker build %s (is Docker running?): %v: %s", img.Tag, err, out)
	}
	return nil
}
