package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

// A bad --listen, or --listen with --port, is a usage error before any
// daemon is asked (there is none here).
func TestServiceUpListenFlagIsChecked(t *testing.T) {
	repo := initRepo(t)
	hint := "for example: --listen 0.0.0.0:8080"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0"}, `--listen "0.0.0.0": want host:port`},
		{[]string{"--listen", ":8080"}, `--listen ":8080": name the host`},
		{[]string{"--listen", "0.0.0.0:99999"}, `port "99999": want 0..65535`},
		{[]string{"--listen", "gpubox.lan:8080"}, "the host must be an IP address of this machine"},
		{[]string{"--listen", "0.0.0.0:8080", "--port", "9000"}, "give --listen HOST:PORT or --port N, not both"},
	} {
		r := gleaner(t, append(append([]string{"--repo", repo, "service", "up"}, c.args...), "service.yaml")...)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != 2 || r.stdout != "" || len(lines) != 2 || !strings.Contains(lines[0], c.want) || !strings.HasPrefix(lines[1], "hint: "+hint) {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit 2 and %q with a hint", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// `service up --listen 0.0.0.0:0`: the URL alone on stdout, and on
// stderr the token's file and a curl line, which, run as printed, is
// served, while a call without the token is refused with 401; `service
// status` shows the same, and after the renter's restart the same curl
// line is served again; `service down` deletes the token.
func TestServiceUpListenBeyondLoopbackFromTheCLI(t *testing.T) {
	requireDocker(t)
	requireModelImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := provider(t, "p", "1xRTX4090")
	mustOK(t, p.cli(t, "offer", "set", "--workloads", "batch,service"), "offer set --workloads")
	rn := startRenter(t, p)
	all := []*rnode{p, rn}
	spec := "name: lan\nkind: service\nimage: " + modelimage.Tag + "\n" +
		"service:\n  port: 8000\n  readiness: {path: /health, period: 1s}\n" +
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 1h}\nallow_simulated: true\n"
	file := filepath.Join(t.TempDir(), "service.yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	r := rn.cli(t, "service", "up", "--listen", "0.0.0.0:0", file)
	mustOK(t, r, "service up --listen")
	url := strings.TrimSuffix(r.stdout, "\n")
	tokenFile := filepath.Join(rn.repo, "service-tokens", "lan.token")
	if strings.Contains(url, "\n") || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("service up's stdout: %q, want the URL alone", r.stdout)
	}
	curl := `curl -H "Authorization: Bearer $(cat ` + tokenFile + `)" ` + url + "/health"
	for _, want := range []string{"listens on 0.0.0.0:", "every call needs the bearer token in " + tokenFile, curl} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("service up's stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	status := func() services.ServiceView {
		r := rn.cli(t, "service", "status", "lan", "--json")
		mustOK(t, r, "service status --json")
		var v services.ServiceView
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("service status --json: %v\n%s", err, r.stdout)
		}
		return v
	}
	ready := func(what string) {
		waitUntil(t, 60*time.Second, what, func() bool {
			v := status()
			return v.Gateway == "up" && len(v.Replicas) == 1 && v.Replicas[0].Ready
		}, all...)
	}
	ready("the replica ready")
	if v := status(); v.Token != tokenFile || v.Curl != curl || v.URL != url {
		t.Fatalf("service status --json: token_file %q, curl %q, url %q", v.Token, v.Curl, v.URL)
	}
	if r := rn.cli(t, "service", "status", "lan"); !strings.Contains(r.stdout, "every call needs the bearer token in "+tokenFile) || !strings.Contains(r.stdout, curl) {
		t.Fatalf("service status:\n%s", r.stdout)
	}
	served := func(when string) {
		t.Helper()
		resp, err := http.Get(url + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: a call without the token: status %d, want 401", when, resp.StatusCode)
		}
		out, err := exec.CommandContext(ctx, "sh", "-c", curl+` -sS -o /dev/null -w '%{http_code}'`).CombinedOutput()
		if err != nil || string(out) != "200" {
			t.Fatalf("%s: the printed curl line: %v, %q; want 200", when, err, out)
		}
	}
	served("after service up")

	rn.restart(t, syscall.SIGTERM)
	ready("the replica ready after the renter's restart")
	if v := status(); v.URL != url || v.Curl != curl {
		t.Fatalf("after the restart: url %q, curl %q; want %q, %q", v.URL, v.Curl, url, curl)
	}
	served("after the renter's restart")

	mustOK(t, rn.cli(t, "service", "down", "lan"), "service down")
	if _, err := os.Stat(tokenFile); !os.IsNotExist(err) {
		t.Fatalf("the token file outlived service down: %v", err)
	}
}
