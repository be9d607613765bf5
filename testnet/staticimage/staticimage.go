// Package staticimage packages one of the repo's Go programs as a Docker
// image FROM scratch: a static binary and nothing else, so tests and the
// demo need no registry and pull nothing.
//
// The image is built through the Docker Engine API with BuildKit, not the
// docker CLI: a CLI without the buildx plugin builds with the legacy
// builder and prints its deprecation warning on every build (and with
// DOCKER_BUILDKIT=1 refuses to build at all). FROM scratch names no base
// image, so BuildKit fetches nothing and the build works offline. An
// engine that refuses BuildKit gets the API's classic builder instead.
package staticimage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
)

// Image is what to build: the main package (relative to the module root),
// the image's tag, and Dockerfile lines after the COPY (USER, EXPOSE...).
type Image struct {
	Package string // "./testnet/demojob"
	Tag     string // "gleaner-demojob:1"
	Extra   string // e.g. "USER 65534:65534\nEXPOSE 8000\n"; "" for none
}

// Build builds img.Package with CGO off for linux and the engine's
// architecture, and builds it FROM scratch as img.Tag, with the binary at
// /<base name> as the entrypoint. moduleRoot is the repository root.
func Build(ctx context.Context, moduleRoot string, img Image) error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker build %s: %w", img.Tag, err)
	}
	defer cli.Close()
	arch := runtime.GOARCH
	if v, err := cli.ServerVersion(ctx); err != nil {
		return fmt.Errorf("docker build %s (is Docker running?): %w", img.Tag, err)
	} else if v.Arch != "" {
		arch = v.Arch
	}
	bin := filepath.Base(img.Package)
	dir, err := os.MkdirTemp("", "gleaner-"+bin+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	gobuild := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, bin), img.Package)
	gobuild.Dir = moduleRoot
	gobuild.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := gobuild.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v: %s", bin, err, out)
	}
	prog, err := os.ReadFile(filepath.Join(dir, bin))
	if err != nil {
		return err
	}
	df := Dockerfile(bin, img.Extra)
	buildCtx := func() io.Reader {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, f := range []struct {
			name string
			mode int64
			b    []byte
		}{{"Dockerfile", 0o644, []byte(df)}, {bin, 0o755, prog}} {
			_ = tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.b)), ModTime: time.Unix(0, 0)})
			_, _ = tw.Write(f.b) // a bytes.Buffer does not fail
		}
		_ = tw.Close()
		return &buf
	}
	err = imageBuild(ctx, cli, buildCtx(), img.Tag, build.BuilderBuildKit)
	var refused *refusedError
	if errors.As(err, &refused) {
		// An engine without BuildKit (Windows, or one too old).
		if err1 := imageBuild(ctx, cli, buildCtx(), img.Tag, build.BuilderV1); err1 != nil {
			return fmt.Errorf("docker build %s: %v; with the classic builder: %w", img.Tag, err, err1)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("docker build %s: %w", img.Tag, err)
	}
	return nil
}

// Dockerfile is the image's Dockerfile: the binary bin alone, FROM
// scratch, extra lines (USER, EXPOSE) before its ENTRYPOINT.
func Dockerfile(bin, extra string) string {
	return fmt.Sprintf("FROM scratch\nCOPY %s /%s\n%sENTRYPOINT [\"/%s\"]\n", bin, bin, extra, bin)
}

// refusedError: the engine refused the build request itself (not a step
// of the build), as one without BuildKit refuses version 2.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// imageBuild sends one build with the builder version and reads its
// progress stream to the end: the first error it reports, or one saying
// that no image came of it.
func imageBuild(ctx context.Context, cli *client.Client, tarCtx io.Reader, tag string, version build.BuilderVersion) error {
	resp, err := cli.ImageBuild(ctx, tarCtx, build.ImageBuildOptions{Version: version, Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return &refusedError{err}
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	built := false
	for {
		var m struct {
			ID     string `json:"id"`     // BuildKit: "moby.image.id" on its aux message
			Stream string `json:"stream"` // classic: "Successfully built ..."
			Error  string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("reading the build's output: %w", err)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
		built = built || m.ID == "moby.image.id" || bytes.HasPrefix([]byte(m.Stream), []byte("Successfully built"))
	}
	if !built {
		return fmt.Errorf("the engine reported no image for %s", tag)
	}
	return nil
}
