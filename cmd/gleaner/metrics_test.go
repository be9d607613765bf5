package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// lockedBuffer is a child's stderr, safe to read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type readyLine struct {
	Event      string `json:"event"`
	Repo       string `json:"repo"`
	RPCURL     string `json:"rpc_url"`
	MetricsURL string `json:"metrics_url"`
}

// startDaemonReady runs `gleaner daemon --json` with extra flags and
// returns its ready line; stop ends it with SIGINT and waits.
func startDaemonReady(t *testing.T, extra ...string) (ready readyLine, stderr *lockedBuffer, stop func()) {
	t.Helper()
	repo := initRepo(t)
	args := append([]string{"--repo", repo, "daemon", "--json", "--mdns=false",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--rpc", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binPath, args...)
	stderr = &lockedBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Errorf("daemon did not stop within 15 s of SIGINT\nstderr: %s", stderr)
			}
		})
	}
	t.Cleanup(stop)
	dec := make(chan error, 1)
	go func() { dec <- json.NewDecoder(bufio.NewReader(out)).Decode(&ready) }()
	select {
	case err := <-dec:
		if err != nil {
			t.Fatalf("daemon never became ready: %v\nstderr: %s", err, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("daemon not ready after 20 s\nstderr: %s", stderr)
	}
	return ready, stderr, stop
}

func TestMetricsFromTheDaemon(t *testing.T) {
	ready, stderr, stop := startDaemonReady(t, "--metrics", "127.0.0.1:0")
	if !strings.HasPrefix(ready.MetricsURL, "http://127.0.0.1:") || !strings.HasSuffix(ready.MetricsURL, "/metrics") {
		t.Fatalf("ready line's metrics_url = %q", ready.MetricsURL)
	}
	// One RPC call, so that the latency histogram has a sample.
	mustOK(t, gleaner(t, "--repo", ready.Repo, "id"), "id")
	resp, err := http.Get(ready.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", ready.MetricsURL, resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gleaner_build_info", "gleaner_peers", "gleaner_jobs", "gleaner_data_store_bytes", "gleaner_rpc_request_duration_seconds", "go_goroutines", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("no %s in the scrape", name)
		}
	}
	if stderr := stderr.String(); !strings.Contains(stderr, ready.MetricsURL) {
		t.Errorf("the log does not name the metrics URL %s:\n%s", ready.MetricsURL, stderr)
	}
	stop()
	if _, err := http.Get(ready.MetricsURL); err == nil {
		t.Errorf("metrics still served after the daemon stopped")
	}
}

func TestLogFormatJSON(t *testing.T) {
	ready, stderr, stop := startDaemonReady(t, "--log-format", "json", "--log-level", "debug")
	if ready.MetricsURL != "" {
		t.Errorf("metrics_url %q without --metrics", ready.MetricsURL)
	}
	stop()
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("stderr line is not a JSON object: %q (%v)", line, err)
		}
		if _, ok := obj["level"].(string); !ok {
			t.Errorf("no level in %q", line)
		}
		if _, ok := obj["msg"].(string); !ok {
			t.Errorf("no msg in %q", line)
		}
		lines++
	}
	if lines < 2 { // at least "shutting down" and "stopped cleanly"
		t.Errorf("only %d log lines:\n%s", lines, stderr)
	}

	r := gleaner(t, "--repo", t.TempDir(), "daemon", "--init", "--log-format", "yaml")
	if r.code != 2 || !strings.Contains(r.stderr, "--log-format") {
		t.Errorf("--log-format yaml: exit %d, stderr %q", r.code, r.stderr)
	}
}
