package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
)

const (
	privUser = "gleaner"
	privPass = "s3cret-pass"
)

// privateRegistry is testRegistry behind HTTP Basic auth: every request
// without user privUser and password privPass gets a 401 with a Basic
// challenge. It counts the requests it let through and those it refused.
type privateRegistry struct {
	addr             string
	authed, refused  atomic.Int64
	authedManifests  atomic.Int64
	authedBlobPulls  atomic.Int64
	refusedManifests atomic.Int64
}

func startPrivateRegistry(t *testing.T) *privateRegistry {
	t.Helper()
	r := &privateRegistry{}
	r.addr = serveRegistry(t, func(reg http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			manifest := (req.Method == http.MethodGet || req.Method == http.MethodHead) && strings.Contains(req.URL.Path, "/manifests/")
			if u, p, ok := req.BasicAuth(); !ok || u != privUser || p != privPass {
				r.refused.Add(1)
				if manifest {
					r.refusedManifests.Add(1)
				}
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			r.authed.Add(1)
			if manifest {
				r.authedManifests.Add(1)
			}
			if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:") {
				r.authedBlobPulls.Add(1)
			}
			reg.ServeHTTP(w, req)
		})
	})
	return r
}

// pushPrivate builds an image with a small layer of its own, pushes it to
// reg with the right credentials and removes it from the engine, so that
// only a pull can bring it back. The pulled image is removed at cleanup.
func pushPrivate(t *testing.T, d *Docker, reg *privateRegistry) string {
	t.Helper()
	ctx := context.Background()
	pad := make([]byte, 256<<10)
	rand.Read(pad)
	ref := fmt.Sprintf("%s/gleaner/private:%d", reg.addr, time.Now().UnixNano())
	buildImage(t, d, ref, map[string][]byte{"pad": pad})
	t.Cleanup(func() { d.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}) })
	hdr, err := encodeRegistryAuth(&RegistryAuth{Username: privUser, Password: privPass}, ref)
	if err != nil {
		t.Fatal(err)
	}
	push, err := d.cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: hdr})
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, "push", push)
	push.Close()
	if _, err := d.cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.ImageInspect(ctx, ref); !cerrdefs.IsNotFound(err) {
		t.Fatalf("image %s still in the engine after removal (inspect: %v)", ref, err)
	}
	return ref
}

// leaks lists what an error or log must never contain for auth: the
// password, the identity token, their Basic and X-Registry-Auth encodings.
func leaks(t *testing.T, text string, auth *RegistryAuth, ref string) []string {
	t.Helper()
	var found []string
	check := func(s string) {
		if s != "" && strings.Contains(text, s) {
			found = append(found, s)
		}
	}
	check(auth.Password)
	check(auth.IdentityToken)
	if auth.Password != "" {
		check(strings.TrimSuffix(auth.Password, "-pass")) // "anything like it"
		check(base64.StdEncoding.EncodeToString([]byte(auth.Username + ":" + auth.Password)))
	}
	if hdr, err := encodeRegistryAuth(auth, ref); err == nil {
		check(hdr)
	}
	return found
}

func TestDockerPrivatePullWithCredentials(t *testing.T) {
	d := needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := startPrivateRegistry(t)
	ref := pushPrivate(t, d, reg)
	auth := &RegistryAuth{Username: privUser, Password: privPass}

	// Create, then Begin: the pull happens in Create.
	authedBefore, manifestsBefore, blobsBefore := reg.authed.Load(), reg.authedManifests.Load(), reg.authedBlobPulls.Load()
	spec := testSpec(t, "hello")
	spec.Image, spec.RegistryAuth = ref, auth
	var events, layers int
	c, err := d.Create(ctx, spec, Hooks{OnPull: func(p PullProgress) {
		events++
		if p.Image != ref {
			t.Errorf("progress for image %q, want %q", p.Image, ref)
		}
		if p.Layer != "" {
			layers++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, c)
	if err := c.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	waitForLog(t, c, "hello from gleaner")
	authed, manifests, blobs := reg.authed.Load()-authedBefore, reg.authedManifests.Load()-manifestsBefore, reg.authedBlobPulls.Load()-blobsBefore
	t.Logf("pulled %s in %v: %d progress events (%d naming a layer); the registry served %d authenticated requests (%d manifests, %d blobs), refused %d",
		ref, res.PullDuration, events, layers, authed, manifests, blobs, reg.refused.Load())
	if !res.Pulled {
		t.Fatalf("pull not reported: %+v", res)
	}
	if manifests == 0 || blobs == 0 {
		t.Fatalf("the registry served %d authenticated manifests and %d blobs: the image did not come from it with credentials", manifests, blobs)
	}
	if layers == 0 {
		t.Fatalf("OnPull got no per-layer progress during an authenticated pull (%d events)", events)
	}

	// The image is now in the engine's store. With credentials set, Start
	// still asks the registry, which checks them.
	manifestsBefore = reg.authedManifests.Load()
	spec = testSpec(t, "hello")
	spec.Image, spec.RegistryAuth = ref, auth
	j, err := d.Start(ctx, spec, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	cleanupJob(t, j)
	if res, err := j.Wait(ctx); err != nil || res.ExitCode != 0 || !res.Pulled {
		t.Fatalf("second authenticated job: %+v %v", res, err)
	}
	if reg.authedManifests.Load() == manifestsBefore {
		t.Fatal("a job with credentials ran a present private image without the registry checking them")
	}

	// Wrong credentials do not get the present image.
	wrong := &RegistryAuth{Username: privUser, Password: "wr0ng-password"}
	spec = testSpec(t, "hello")
	spec.Image, spec.RegistryAuth = ref, wrong
	if j, err := d.Start(ctx, spec, Hooks{}); err == nil {
		cleanupJob(t, j)
		t.Fatal("a job with a wrong password ran the private image the engine had")
	} else if !strings.Contains(err.Error(), "executor: pull "+ref+": the registry refused the pull") {
		t.Fatalf("wrong password on a present image: %v", err)
	} else if l := leaks(t, err.Error(), wrong, ref); len(l) > 0 {
		t.Fatalf("error leaks %q: %v", l, err)
	}

	// Nor does a job without credentials: this Docker pulled the image
	// privately, so it asks the registry again, anonymously.
	spec = testSpec(t, "hello")
	spec.Image = ref
	if j, err := d.Start(ctx, spec, Hooks{}); err == nil {
		cleanupJob(t, j)
		t.Fatal("a job without credentials ran the private image this executor had pulled")
	} else if !strings.Contains(err.Error(), "executor: pull "+ref+": the registry refused the pull: credentials needed") {
		t.Fatalf("anonymous job on a present private image: %v", err)
	}
	if left := containersOf(t, d, spec.JobID); len(left) != 0 {
		t.Fatalf("a refused pull left %d containers", len(left))
	}
}

func TestDockerPrivatePullWithoutCredentials(t *testing.T) {
	d := needDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := startPrivateRegistry(t)
	ref := pushPrivate(t, d, reg)

	for _, c := range []struct {
		name string
		auth *RegistryAuth
	}{
		{"no credentials", nil},
		{"wrong password", &RegistryAuth{Username: privUser, Password: "s3cret-pasz"}},
		{"wrong user", &RegistryAuth{Username: "mallory", Password: privPass}},
		{"identity token", &RegistryAuth{IdentityToken: "tok-" + privPass}},
	} {
		refusedBefore := reg.refused.Load()
		spec := testSpec(t, "hello")
		spec.Image, spec.RegistryAuth = ref, c.auth
		j, err := d.Start(ctx, spec, Hooks{})
		if err == nil {
			cleanupJob(t, j)
			t.Fatalf("%s: started a job from the private image %s", c.name, ref)
		}
		t.Logf("%s: %v", c.name, err)
		msg := err.Error()
		if !strings.HasPrefix(msg, "executor: pull "+ref+": the registry refused the pull: credentials needed (registry_auth) or wrong: ") {
			t.Errorf("%s: error does not say the registry refused the pull of %s: %v", c.name, ref, err)
		}
		if errors.Is(err, ErrBadSpec) {
			t.Errorf("%s: a refused pull is no bad spec: %v", c.name, err)
		}
		// Neither the right password nor the one sent may appear.
		for _, a := range []*RegistryAuth{{Username: privUser, Password: privPass}, c.auth} {
			if a == nil {
				continue
			}
			if l := leaks(t, msg, a, ref); len(l) > 0 {
				t.Errorf("%s: error leaks %q: %v", c.name, l, err)
			}
		}
		if reg.refused.Load() == refusedBefore {
			t.Errorf("%s: the registry refused nothing: the failure did not come from it", c.name)
		}
		if left := containersOf(t, d, spec.JobID); len(left) != 0 {
			t.Errorf("%s: a refused pull left %d containers", c.name, len(left))
		}
	}
	if _, err := d.cli.ImageInspect(ctx, ref); !cerrdefs.IsNotFound(err) {
		t.Fatalf("refused pulls left the image %s in the engine (inspect: %v)", ref, err)
	}
}

func TestRegistryAuthRedacted(t *testing.T) {
	auth := &RegistryAuth{Username: privUser, Password: privPass, IdentityToken: "idtok-9f8e7d", ServerAddress: "127.0.0.1:5000"}
	spec := Spec{JobID: "j1", Image: "127.0.0.1:5000/gleaner/private:1", CPUs: 1, MemoryMiB: 1, Pids: 1,
		Secrets: Secrets{"API_KEY": "secret-value-42"}, RegistryAuth: auth}
	secrets := []string{privPass, "s3cret", auth.IdentityToken, "secret-value-42",
		base64.StdEncoding.EncodeToString([]byte(privUser + ":" + privPass))}

	var outputs []string
	outputs = append(outputs, fmt.Sprintf("%v %+v %#v", spec, spec, spec))
	outputs = append(outputs, fmt.Sprintf("%v %+v %#v", &spec, &spec, &spec))
	outputs = append(outputs, fmt.Sprintf("%v %+v %#v %s %q", auth, auth, auth, auth, auth))
	outputs = append(outputs, fmt.Sprintf("%v %+v %#v %s", *auth, *auth, *auth, *auth))
	outputs = append(outputs, fmt.Sprint(spec, auth), fmt.Sprintln(spec, *auth))
	for _, v := range []any{spec, &spec, auth, *auth} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, string(b))
	}
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logs, nil), slog.NewTextHandler(&logs, nil)} {
		l := slog.New(h)
		l.Info("start", "spec", spec, "specp", &spec, "auth", auth, "authv", *auth)
		l.Info("start", slog.Any("spec", spec), slog.Group("g", "auth", auth))
	}
	outputs = append(outputs, logs.String())
	// The validation errors never show them either.
	bad := spec
	bad.RegistryAuth = &RegistryAuth{Username: privUser, Password: privPass, ServerAddress: "evil.example.com"}
	outputs = append(outputs, bad.validate().Error())

	for i, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("output %d shows %q: %s", i, s, out)
			}
		}
	}
	if s := auth.String(); s != "RegistryAuth{user=gleaner, password=REDACTED, identity_token=REDACTED, server=127.0.0.1:5000}" {
		t.Errorf("String() = %q", s)
	}
	if !strings.Contains(logs.String(), "user=gleaner") {
		t.Errorf("the logs do not even name the user: %s", logs.String())
	}
	t.Logf("%+v", spec)
}

func TestRegistryAuthValidation(t *testing.T) {
	base := Spec{JobID: "j1", Image: "127.0.0.1:5000/gleaner/private:1", CPUs: 1, MemoryMiB: 1, Pids: 1}
	for name, c := range map[string]struct {
		image string
		auth  RegistryAuth
		want  string // in the error; "" for a valid spec
	}{
		"user and password": {"", RegistryAuth{Username: "u", Password: "p"}, ""},
		"identity token":    {"", RegistryAuth{IdentityToken: "t"}, ""},
		"user and token":    {"", RegistryAuth{Username: "u", IdentityToken: "t"}, ""},
		"same server":       {"", RegistryAuth{Username: "u", Password: "p", ServerAddress: "127.0.0.1:5000"}, ""},
		"server with scheme": {"", RegistryAuth{Username: "u", Password: "p", ServerAddress: "http://127.0.0.1:5000/v2/"},
			""},
		"hub, index address": {"ubuntu:24.04", RegistryAuth{Username: "u", Password: "p", ServerAddress: "https://index.docker.io/v1/"}, ""},
		"hub, docker.io":     {"docker.io/library/ubuntu", RegistryAuth{Username: "u", Password: "p", ServerAddress: "docker.io"}, ""},
		"ghcr":               {"ghcr.io/o/r:1", RegistryAuth{Username: "u", Password: "p", ServerAddress: "ghcr.io"}, ""},

		"empty":              {"", RegistryAuth{}, "no credentials"},
		"user only":          {"", RegistryAuth{Username: "u"}, "without a password"},
		"password only":      {"", RegistryAuth{Password: "p"}, "password without a user name"},
		"server only":        {"", RegistryAuth{ServerAddress: "127.0.0.1:5000"}, "no credentials"},
		"other registry":     {"", RegistryAuth{Username: "u", Password: "p", ServerAddress: "evil.example.com"}, `server address "evil.example.com" is not the registry "127.0.0.1:5000"`},
		"other port":         {"", RegistryAuth{Username: "u", Password: "p", ServerAddress: "127.0.0.1:5001"}, "is not the registry"},
		"hub image, ghcr":    {"ubuntu", RegistryAuth{Username: "u", Password: "p", ServerAddress: "ghcr.io"}, `is not the registry "docker.io"`},
		"ghcr image, hub":    {"ghcr.io/o/r", RegistryAuth{Username: "u", Password: "p", ServerAddress: "docker.io"}, `is not the registry "ghcr.io"`},
		"bad image":          {"UPPER/Case", RegistryAuth{Username: "u", Password: "p"}, "image reference"},
		"server as hostpath": {"", RegistryAuth{Username: "u", Password: "p", ServerAddress: "evil.example.com/127.0.0.1:5000"}, "is not the registry"},
	} {
		s := base
		if c.image != "" {
			s.Image = c.image
		}
		a := c.auth
		s.RegistryAuth = &a
		err := s.validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.want != "" && (!errors.Is(err, ErrBadSpec) || !strings.Contains(fmt.Sprint(err), c.want)):
			t.Errorf("%s: got %v, want ErrBadSpec with %q", name, err, c.want)
		case err != nil && strings.Contains(err.Error(), "registry_auth") == false:
			t.Errorf("%s: error does not name registry_auth: %v", name, err)
		}
	}
	// nil pulls anonymously and is valid.
	if err := base.validate(); err != nil {
		t.Fatal(err)
	}
}

// The engine's messages are scrubbed of every form of the credentials,
// and a refusal is told from other failures.
func TestRegistryAuthScrubAndClassify(t *testing.T) {
	a := &RegistryAuth{Username: privUser, Password: privPass, IdentityToken: "idtok"}
	hdr, _ := encodeRegistryAuth(a, "127.0.0.1:5000/x")
	basic := base64.StdEncoding.EncodeToString([]byte(privUser + ":" + privPass))
	msg := "Get http://127.0.0.1:5000/v2/: unauthorized: Basic " + basic + " " + privPass + " idtok " + hdr
	err := pullError("127.0.0.1:5000/x", a, hdr, msg, errors.New(msg))
	for _, s := range []string{privPass, "idtok", basic, hdr} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("%q left in %v", s, err)
		}
	}
	if errors.Unwrap(err) != nil {
		t.Errorf("the error wraps the engine's unscrubbed one: %v", err)
	}
	for msg, want := range map[string]bool{
		"unauthorized: authentication required": true,
		"no basic auth credentials":             true,
		"pull access denied for x, repository does not exist or may require 'docker login'":          true,
		"denied: requested access to the resource is denied":                                         true,
		"received unexpected HTTP status: 401 Unauthorized":                                          true,
		"manifest for 127.0.0.1:5000/x:absent not found: manifest unknown":                           false,
		"failed to register layer: open /var/lib/docker/x: permission denied":                        false,
		"manifest sha256:4401aa0000000000000000000000000000000000000000000000000000000401 not found": false,
	} {
		if got := refusedPull(msg); got != want {
			t.Errorf("refusedPull(%q) = %v, want %v", msg, got, want)
		}
	}
}
