package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/testnet"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
)

const (
	privUser = "gleaner"
	privPass = "s3cret-pass-7f3a"
)

// TestJobFromPrivateRegistry: the demo image pushed to a registry on
// loopback that demands credentials. A job whose spec names a
// registry_auth_file runs; the same job without one is refused with a
// message that says why. The password is nowhere in either node's repo
// or logs: it travels to the winner only and is never stored.
func TestJobFromPrivateRegistry(t *testing.T) {
	requireDocker(t)
	reg, authed := startAuthRegistry(t)
	ref := pushDemo(t, reg)

	p := provider(t, "provider", "1xRTX4090")
	rn := startRenter(t, p)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "registry.auth"), []byte("username="+privUser+"\npassword="+privPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("image: %s\ncommand: [\"-lines\", \"1\"]\nresources: {gpus: 1}\ntier: silver\nmax_price: 1.00\n"+
		"duration: {max: 10m}\nallow_simulated: true\n", ref)
	withAuth := filepath.Join(dir, "private.yaml")
	if err := os.WriteFile(withAuth, []byte("name: private\nregistry_auth_file: ./registry.auth\n"+base), 0o600); err != nil {
		t.Fatal(err)
	}
	var sub renting.JobRecord
	decodeJSON(t, rn.cli(t, "job", "submit", "--json", withAuth), "submit with credentials", &sub)
	j := rn.waitJob(t, sub.ID, 3*time.Minute, "the job ends", func(j renting.JobRecord) bool { return terminalState(j.State) }, p, rn)
	if j.State != renting.StateCompleted {
		t.Fatalf("job from the private registry: %s: %s\n%s", j.State, j.Error, tails([]*rnode{p, rn}))
	}
	if authed.Load() == 0 {
		t.Fatal("the registry saw no authenticated request: the image did not come from it")
	}

	without := filepath.Join(dir, "public.yaml")
	if err := os.WriteFile(without, []byte("name: no-creds\n"+base), 0o600); err != nil {
		t.Fatal(err)
	}
	id := rn.submit(t, string(must(os.ReadFile(without))), "")
	j = rn.waitJob(t, id, 3*time.Minute, "the job without credentials ends", func(j renting.JobRecord) bool {
		return terminalState(j.State) || j.State == renting.StateNoMatch
	}, p, rn)
	if j.State == renting.StateCompleted || !strings.Contains(j.Error, "credentials") {
		t.Fatalf("job without credentials: %s: %q", j.State, j.Error)
	}

	for _, n := range []*rnode{p, rn} {
		if strings.Contains(n.tail(), privPass) {
			t.Errorf("%s's log holds the registry password", n.name)
		}
		_ = filepath.WalkDir(n.repo, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(privPass)) {
				t.Errorf("%s: %s holds the registry password", n.name, path)
			}
			return nil
		})
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// startAuthRegistry serves go-containerregistry's in-memory registry on
// loopback behind HTTP Basic auth, and counts the requests that passed it.
func startAuthRegistry(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0)))
	var authed atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, pw, ok := r.BasicAuth(); !ok || u != privUser || pw != privPass {
			w.Header().Set("WWW-Authenticate", `Basic realm="gleaner-test"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		authed.Add(1)
		reg.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), &authed
}

// pushDemo pushes the demo image to the registry under a fresh tag and
// removes the tag from the engine, so that a job can have it only by a
// pull that the registry authenticates.
func pushDemo(t *testing.T, reg string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ref := fmt.Sprintf("%s/private/demojob:%d", reg, time.Now().UnixNano())
	if err := cli.ImageTag(ctx, testnet.DemoImage, ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true})
	})
	auth, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: privUser, Password: privPass, ServerAddress: reg})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = jsonmessage.DisplayJSONMessagesStream(rc, &out, 0, false, nil)
	rc.Close()
	if err != nil {
		t.Fatalf("push %s: %v\n%s", ref, err, out.String())
	}
	if _, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	return ref
}
