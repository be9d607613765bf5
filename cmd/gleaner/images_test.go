package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/testnet"
)

// Each image the tests run is built once per test binary, however many
// tests need it: every build of a tag (a go build and link of its
// program, a BuildKit build) gives the same image and takes seconds (6-10
// s on a loaded 2-core machine), and over twenty tests need the demo
// image alone. A failed build fails every test that needs the image.
var imageBuilds sync.Map // tag -> *imageBuild

type imageBuild struct {
	once sync.Once
	err  error
}

// buildImageOnce builds tag with build the first time a test asks for it,
// and fails t if that build failed.
func buildImageOnce(t *testing.T, tag string, build func(context.Context) error) {
	t.Helper()
	v, _ := imageBuilds.LoadOrStore(tag, &imageBuild{})
	b := v.(*imageBuild)
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		b.err = build(ctx)
	})
	if b.err != nil {
		t.Fatalf("build %s (this test needs a running Docker engine): %v", tag, b.err)
	}
}

// requireModelImage builds the test model server's image (testnet/modelserver).
func requireModelImage(t *testing.T) {
	t.Helper()
	buildImageOnce(t, testnet.ModelImage, func(ctx context.Context) error { return testnet.BuildModelImage(ctx, "../..") })
}
