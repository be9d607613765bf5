package staticimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// Build makes the image through the Engine API with BuildKit (no docker
// CLI, so no legacy-builder warning, and no fallback taken here): FROM
// scratch, the binary as its entrypoint, the extra lines applied.
func TestBuildFromScratchWithBuildKit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatalf("this test needs a running Docker engine: %v", err)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	tag := "gleaner-staticimage-test:" + hex.EncodeToString(suffix)
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true, PruneChildren: true})
	})

	// BuildKit itself, as Build asks first: an engine that refused it
	// would make Build fall back, and hide that.
	df := Dockerfile("hello", "")
	if err := imageBuild(ctx, cli, tarOf(t, map[string]string{"Dockerfile": df, "hello": "not a program"}), tag, build.BuilderBuildKit); err != nil {
		t.Fatalf("BuildKit through the Engine API: %v", err)
	}

	if err := Build(ctx, "../..", Image{Package: "./testnet/demojob", Tag: tag, Extra: "USER 65534:65534\nEXPOSE 8000\n"}); err != nil {
		t.Fatal(err)
	}
	ins, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if c := ins.Config; c == nil || !slices.Equal(c.Entrypoint, []string{"/demojob"}) || c.User != "65534:65534" {
		t.Fatalf("image config %+v", ins.Config)
	} else if _, ok := c.ExposedPorts["8000/tcp"]; !ok {
		t.Errorf("exposed ports %v", c.ExposedPorts)
	}
	if n := len(ins.RootFS.Layers); n != 1 {
		t.Errorf("%d layers, want the binary's alone (FROM scratch)", n)
	}
	if ins.Size > 64<<20 {
		t.Errorf("%d bytes: more than a static binary", ins.Size)
	}
	// A build that fails says why.
	err = imageBuild(ctx, cli, tarOf(t, map[string]string{"Dockerfile": "FROM scratch\nCOPY missing /missing\n"}), tag+"-bad", build.BuilderBuildKit)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a COPY of a missing file: %v", err)
	}
}

func tarOf(t *testing.T, files map[string]string) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}
