package executor

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/google/go-containerregistry/pkg/registry"
)

// testRegistry is an in-process registry (go-containerregistry's
// pkg/registry, kept in memory) on loopback: the engine treats
// 127.0.0.0/8 as an insecure registry, so no TLS is needed, and the
// engine runs on this host, so it reaches the listener. It counts the
// manifests and blobs it serves, so that a test can tell a pull that went
// to the registry from one the engine answered from its own store.
type testRegistry struct {
	addr          string
	manifestPulls atomic.Int64
	blobPulls     atomic.Int64
}

func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{}
	r.addr = serveRegistry(t, func(reg http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/manifests/") {
				r.manifestPulls.Add(1)
			}
			if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:") {
				r.blobPulls.Add(1)
			}
			reg.ServeHTTP(w, req)
		})
	})
	return r
}

// serveRegistry serves an in-memory registry on loopback behind wrap
// (counting, auth) until the test ends, and returns its host:port.
func serveRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: wrap(registry.New(registry.Logger(log.New(io.Discard, "", 0))))}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

func TestDockerPullsAbsentImage(t *testing.T) {
	d := needDocker(t)
	ctx := context.Background()
	reg := startRegistry(t)

	// An image with an 8 MiB layer of its own, so the pull downloads
	// something even though the probe's layer is already local.
	pad := make([]byte, 8<<20)
	rand.Read(pad)
	repo := fmt.Sprintf("%s/gleaner/pulltest", reg.addr)
	ref := fmt.Sprintf("%s:%d", repo, time.Now().UnixNano())
	buildImage(t, d, ref, map[string][]byte{"pad": pad})
	push, err := d.cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: "e30="}) // "{}": no credentials
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, "push", push)
	push.Close()
	if _, err := d.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}) })
	// The image must be absent from the engine, so that only a pull from
	// the registry can give the executor its layers.
	if _, err := d.cli.ImageInspect(ctx, ref); !cerrdefs.IsNotFound(err) {
		t.Fatalf("image %s still in the engine after removal (inspect: %v)", ref, err)
	}
	manifestsBefore, blobsBefore := reg.manifestPulls.Load(), reg.blobPulls.Load()

	spec := testSpec(t, "hello")
	spec.Image = ref
	var events, withBytes, layers int
	j, err := d.Start(ctx, spec, Hooks{OnPull: func(p PullProgress) {
		events++
		if p.Image != ref {
			t.Errorf("progress for image %q, want %q", p.Image, ref)
		}
		if p.Total > 0 {
			withBytes++
		}
		if p.Layer != "" && p.Total > 0 {
			layers++ // a layer's download, with its size
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	res, err := j.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	manifests, blobs := reg.manifestPulls.Load()-manifestsBefore, reg.blobPulls.Load()-blobsBefore
	t.Logf("pulled %s in %v (%d progress events, %d with byte counts; the registry served %d manifests, %d blobs)",
		ref, res.PullDuration, events, withBytes, manifests, blobs)
	if !res.Pulled || res.PullDuration <= 0 || withBytes == 0 {
		t.Fatalf("pull not reported: %+v, %d events", res, events)
	}
	if layers == 0 {
		t.Fatalf("no progress event names a layer and its size (%d events)", events)
	}
	if manifests == 0 || blobs == 0 {
		t.Fatalf("the registry served %d manifests and %d blobs: the image did not come from it", manifests, blobs)
	}
	if string(j.Logs().Bytes()) != "hello from gleaner\n" {
		t.Fatalf("logs %q", j.Logs().Bytes())
	}

	// A tag the registry does not have: Start fails, naming the image and
	// saying it was not found, and leaves nothing of the job behind.
	missing := repo + ":absent"
	spec = testSpec(t, "hello")
	spec.Image = missing
	j, err = d.Start(ctx, spec, Hooks{})
	if err == nil {
		cleanupJob(t, j)
		t.Fatalf("started a job from the absent image %s", missing)
	}
	t.Logf("absent tag: %v", err)
	msg := err.Error()
	if !strings.Contains(msg, "pull "+missing) || !strings.Contains(msg, "not found") {
		t.Fatalf("error for an absent tag does not say that pulling %s found nothing: %v", missing, err)
	}
	if left := containersOf(t, d, spec.JobID); len(left) != 0 {
		t.Fatalf("a failed pull left %d containers", len(left))
	}
}
