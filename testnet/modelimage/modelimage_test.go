package modelimage

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// docker runs the Docker CLI and fails the test on error.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestImageServesCompletions builds the image and runs it as a provider
// would, configured only by environment: readiness, a completion and a
// stream through the published port, then `docker stop` (SIGTERM) must
// end it cleanly with exit code 0. It fails, never skips, without Docker.
func TestImageServesCompletions(t *testing.T) {
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("this needs a running Docker engine (it runs a real container): %v: %s", err, out)
	}
	// Leave the engine as we found it: remove the image only if this test
	// is what put it there.
	if exec.Command("docker", "image", "inspect", Tag).Run() != nil {
		t.Cleanup(func() { _ = exec.Command("docker", "image", "rm", "-f", Tag).Run() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Build(ctx, "../.."); err != nil {
		t.Fatal(err)
	}
	id := docker(t, "run", "-d", "-p", fmt.Sprintf("127.0.0.1::%d", Port),
		"-e", "MODELSERVER_MODEL=img-model", "-e", "MODELSERVER_LOAD_DELAY=300ms",
		"-e", "MODELSERVER_TOKEN_DELAY=10ms", Tag)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	addr := docker(t, "port", id, fmt.Sprintf("%d/tcp", Port))
	base := "http://" + strings.Fields(addr)[0]

	// The server listens at once but is ready only after its load delay.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 20s (last: %v); logs: %s", err, docker(t, "logs", id))
		}
		time.Sleep(50 * time.Millisecond)
	}

	resp, err := http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"img-model","prompt":"one two three","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Object  string
		Model   string
		Choices []struct{ Text string }
		Usage   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || c.Object != "text_completion" || c.Model != "img-model" ||
		len(c.Choices) != 1 || c.Choices[0].Text != "tok0 tok1 tok2 tok3" || c.Usage.PromptTokens != 3 || c.Usage.CompletionTokens != 4 {
		t.Fatalf("completion: status %d, %v, %+v", resp.StatusCode, err, c)
	}

	resp, err = http.Post(base+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"img-model","max_tokens":3,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		}
	}
	resp.Body.Close()
	if len(events) != 5 || events[4] != "[DONE]" || !strings.Contains(events[3], `"completion_tokens":3`) {
		t.Fatalf("stream: %q", events)
	}

	t0 := time.Now()
	docker(t, "stop", "-t", "10", id)
	if took := time.Since(t0); took > 8*time.Second {
		t.Errorf("docker stop took %v: SIGTERM was not handled", took)
	}
	if code := docker(t, "inspect", "-f", "{{.State.ExitCode}}", id); code != "0" {
		t.Fatalf("exit code after SIGTERM: %s; logs: %s", code, docker(t, "logs", id))
	}
}
