package readme

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/executor"
)

// Each part's limit. On two cores busy with the rest of `go test ./...`
// the whole test takes minutes (the simulator most of them); these bound
// a hang, not a slow machine.
const (
	demoLimit    = 5 * time.Minute
	serviceLimit = 6 * time.Minute
	simLimit     = 10 * time.Minute
	stopLimit    = time.Minute // from Ctrl-C to testnet up's exit
	tailLines    = 200         // the output kept for a failure's log
)

// The README's placeholders in the service quick start, and what fills
// them.
const (
	repoPlaceholder = "<last node's repo>"
	urlPlaceholder  = "<its URL>"
)

// TestReadmeCommands runs README.md's commands from a copy of the
// repository's files (tracked, and untracked but not ignored) in a
// directory of its own: make demo; the service quick start line by line,
// with testnet up in the background until a Ctrl-C, its placeholders
// filled from what the commands before printed; and gleaner sim with its
// defaults. Any code that reads a path beside the repository, any image
// the docs use that no make target builds, any command the README names
// that fails or no longer exists, fails it.
func TestReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not running README's commands from a copy of the repository (make demo, the service quick start and gleaner sim take minutes and Docker)")
	}
	requireTools(t)
	root := repoRoot(t)
	cmds := readmeCommands(t, filepath.Join(root, "README.md"))
	dir := copyRepo(t, root)

	t.Run("demo", func(t *testing.T) { runDemo(t, dir, cmds.demo) })
	t.Run("service", func(t *testing.T) { runService(t, dir, cmds.service) })
	t.Run("sim", func(t *testing.T) { runSim(t, dir) })
}

// runDemo runs `make demo` and checks that the job ran in a container
// and that the demo left nothing on the engine.
func runDemo(t *testing.T, dir, line string) {
	r := newRunner(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), demoLimit)
	defer cancel()
	start := time.Now()
	out, err := r.run(ctx, line)
	t.Logf("%s: %v from the copy (build, image and demo)", command(line), time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Lines only a job that ran prints: the demo workload's own greeting
	// from inside its container, and the renter's completed summary.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^hello from a gleaner job: uid 65534, simulated GPUs "1"`),
		regexp.MustCompile(`(?m)^state:\s+completed$`),
		regexp.MustCompile(`(?m)^exit code:\s+0$`),
		regexp.MustCompile(`(?m)^all nodes stopped$`),
	} {
		if !want.MatchString(out.all) {
			t.Errorf("%s exited 0 but its output has no line matching %q: the job did not run, or the demo no longer says so", line, want)
		}
	}
	peers, _, err := nodesTable(out.stdout)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if left := leftovers(t, peers); len(left) > 0 {
		t.Errorf("%s left on the Docker engine: %s", line, strings.Join(left, ", "))
	}
}

// runService runs the service quick start's lines in order, as a user
// with two terminals would: testnet up stays in the background; the
// lines after it get the last node's repo and the service's URL; a Ctrl-C
// ends testnet up, which must exit 0 and leave nothing on the engine.
func runService(t *testing.T, dir string, lines []string) {
	r := newRunner(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), serviceLimit)
	defer cancel()
	start := time.Now()
	var (
		tn     *background
		peers  []string
		repo   string
		url    string
		served bool
	)
	for _, raw := range lines {
		line, err := fill(raw, repo, url)
		if err != nil {
			t.Fatal(err)
		}
		switch role(raw) {
		case roleTestnetUp:
			tn = r.start(line)
			// It prints the nodes, then the market, then waits for Ctrl-C.
			if err := tn.waitFor(ctx, func() bool { return strings.Contains(tn.stderr.String(), "press Ctrl-C to stop every node") }); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			if peers, repo, err = lastRepo(tn.stdout.String()); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			t.Logf("%s: up after %v", command(line), time.Since(start).Round(100*time.Millisecond))
		case roleServiceUp:
			out, err := r.run(ctx, line)
			if err != nil {
				t.Fatal(err)
			}
			url = lastLine(out.stdout)
			if !strings.HasPrefix(url, "http://") {
				t.Fatalf("%s printed %q on stdout, not the service's URL", line, url)
			}
		case roleCurl:
			out, err := r.run(ctx, line)
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				Choices []struct {
					Text string `json:"text"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(out.stdout), &c); err != nil || len(c.Choices) == 0 || strings.TrimSpace(c.Choices[0].Text) == "" {
				t.Fatalf("%s did not answer a completion with text (%v): %s", line, err, out.stdout)
			}
			served = true
			t.Logf("first completion %v after testnet up started: %q", time.Since(start).Round(100*time.Millisecond), c.Choices[0].Text)
			// The replicas run in containers of the testnet's providers:
			// the check for leftovers below looks where they are.
			if len(leftovers(t, peers)) == 0 {
				t.Errorf("a completion was served, yet no container carries the label %s of a testnet node: the leftover check below would see nothing", executor.LabelNode)
			}
		default: // make build images, service down
			if _, err := r.run(ctx, line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !served {
		t.Fatal("the service quick start ran without serving a completion")
	}
	if err := tn.interrupt(); err != nil {
		t.Fatalf("testnet up, after Ctrl-C: %v", err)
	}
	if !strings.Contains(tn.stderr.String(), "all nodes stopped") {
		t.Errorf("testnet up exited 0 after Ctrl-C but did not say %q", "all nodes stopped")
	}
	if left := leftovers(t, peers); len(left) > 0 {
		t.Errorf("the service quick start left on the Docker engine, after service down and Ctrl-C: %s", strings.Join(left, ", "))
	}
}

// runSim runs `gleaner sim` with its defaults (the README's line names
// them; the test checks that the line is there) and checks its report.
func runSim(t *testing.T, dir string) {
	r := newRunner(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), simLimit)
	defer cancel()
	if _, err := r.run(ctx, "make build"); err != nil { // built already, unless -run picked this part alone
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := r.run(ctx, "./bin/gleaner sim"); err != nil {
		t.Fatal(err)
	}
	t.Logf("gleaner sim with its defaults: %v", time.Since(start).Round(100*time.Millisecond))
	out := filepath.Join(dir, "build", "sim") // the default --out
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatalf("gleaner sim exited 0 without its report in build/sim, its default --out: %v", err)
	}
	var rep struct {
		Demand struct {
			Jobs int `json:"jobs"`
		} `json:"demand"`
		Strategies []struct {
			Name string `json:"name"`
		} `json:"strategies"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if rep.Demand.Jobs == 0 || len(rep.Strategies) == 0 {
		t.Errorf("report.json has %d jobs and %d strategies: the simulator ran nothing", rep.Demand.Jobs, len(rep.Strategies))
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(html, []byte("<html")) {
		t.Errorf("report.html (%d bytes) is not an HTML page", len(html))
	}
}

// commands are the README's lines this test runs.
type commands struct {
	demo    string   // make demo
	service []string // the service quick start's block, in order
}

// The roles of the service quick start's lines.
const (
	roleOther = iota
	roleTestnetUp
	roleServiceUp
	roleCurl
)

func role(line string) int {
	c := command(line)
	switch {
	case strings.Contains(c, " testnet up "):
		return roleTestnetUp
	case strings.Contains(c, " service up "):
		return roleServiceUp
	case strings.HasPrefix(c, "curl "):
		return roleCurl
	}
	return roleOther
}

// readmeCommands finds, in README.md's ```sh blocks, make demo, the
// service quick start (the block with testnet up) and a gleaner sim line,
// failing with what is missing.
func readmeCommands(t *testing.T, path string) commands {
	t.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds commands
	sim := false
	for _, block := range shBlocks(string(md)) {
		for _, line := range block {
			c := command(line)
			switch {
			case c == "make demo":
				cmds.demo = line
			case c == "gleaner sim" || strings.HasPrefix(c, "gleaner sim "):
				sim = true
			case strings.HasPrefix(c, "./bin/gleaner testnet up ") && cmds.service == nil:
				cmds.service = block
			}
		}
	}
	if cmds.demo == "" {
		t.Error("README.md: no `make demo` line in a ```sh block")
	}
	if !sim {
		t.Error("README.md: no `gleaner sim` line in a ```sh block")
	}
	if cmds.service == nil {
		t.Fatal("README.md: no ```sh block with `./bin/gleaner testnet up`: the service quick start is gone")
	}
	// What the quick start must do, in this order: build the binary and
	// the images, start the testnet, start the service, call it, take it
	// down.
	want := []struct {
		what string
		ok   func(string) bool
	}{
		{"make ... images", func(c string) bool { return strings.HasPrefix(c, "make ") && strings.Contains(c+" ", " images ") }},
		{"./bin/gleaner testnet up", func(c string) bool { return role(c) == roleTestnetUp }},
		{"service up with " + repoPlaceholder, func(c string) bool { return role(c) == roleServiceUp && strings.Contains(c, repoPlaceholder) }},
		{"curl " + urlPlaceholder + "/v1/completions", func(c string) bool {
			return role(c) == roleCurl && strings.Contains(c, urlPlaceholder+"/v1/completions")
		}},
		{"service down", func(c string) bool { return strings.Contains(c, " service down ") }},
	}
	i := 0
	for _, line := range cmds.service {
		if i < len(want) && want[i].ok(command(line)) {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("README.md's service quick start has no `%s` line (after the ones before it); the block is:\n%s", want[i].what, strings.Join(cmds.service, "\n"))
	}
	return cmds
}

// shBlocks returns the lines of each ```sh fenced block.
func shBlocks(md string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```sh":
			in, cur = true, nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, cur)
		case in && trimmed != "":
			cur = append(cur, trimmed)
		}
	}
	return blocks
}

// command is a line without its comment.
func command(line string) string {
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	return strings.TrimSpace(line)
}

var placeholder = regexp.MustCompile(`<[a-z][^>]*>`)

// fill puts the last node's repo and the service's URL in a line's
// placeholders, quoted for the shell; a placeholder this test does not
// know, or one whose value no command before has printed, is an error.
func fill(line, repo, url string) (string, error) {
	for ph, v := range map[string]string{repoPlaceholder: repo, urlPlaceholder: url} {
		if strings.Contains(line, ph) {
			if v == "" {
				return "", fmt.Errorf("README.md: %q needs %s before a line printed it", line, ph)
			}
			line = strings.ReplaceAll(line, ph, shellQuote(v))
		}
	}
	if ph := placeholder.FindString(command(line)); ph != "" {
		return "", fmt.Errorf("README.md: %q has the placeholder %s, which this test cannot fill", line, ph)
	}
	return line, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// nodesTable reads the table of nodes testnet up prints: each node's peer
// ID and repo, in order.
func nodesTable(out string) (peers, repos []string, err error) {
	cols := regexp.MustCompile(`\s{2,}`)
	var header []string
	for _, line := range strings.Split(out, "\n") {
		fields := cols.Split(strings.TrimSpace(line), -1)
		if header == nil {
			if len(fields) > 1 && fields[0] == "NODE" {
				header = fields
			}
			continue
		}
		if len(fields) != len(header) {
			break
		}
		for i, h := range header {
			switch h {
			case "PEER ID":
				peers = append(peers, fields[i])
			case "REPO":
				repos = append(repos, fields[i])
			}
		}
	}
	if len(peers) == 0 || len(repos) != len(peers) {
		return nil, nil, fmt.Errorf("no table of nodes with PEER ID and REPO columns in its output")
	}
	return peers, repos, nil
}

func lastRepo(out string) (peers []string, repo string, err error) {
	peers, repos, err := nodesTable(out)
	if err != nil {
		return nil, "", err
	}
	return peers, repos[len(repos)-1], nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// leftovers lists the containers, volumes and networks on the engine that
// one of these nodes created (the executor labels each with its node's
// peer ID).
func leftovers(t *testing.T, peers []string) []string {
	t.Helper()
	var left []string
	for _, p := range peers {
		filter := "label=" + executor.LabelNode + "=" + p
		for _, kind := range [][]string{{"ps", "-a"}, {"volume", "ls"}, {"network", "ls"}} {
			args := append(append([]string{}, kind...), "-q", "--filter", filter)
			out, err := exec.Command("docker", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
			}
			for _, id := range strings.Fields(string(out)) {
				left = append(left, fmt.Sprintf("%s %s of node %s", kind[0], id, p))
			}
		}
	}
	return left
}

// requireTools fails, saying what to install, when a tool the README's
// commands use is missing: this test never passes by not running.
func requireTools(t *testing.T) {
	t.Helper()
	for _, tool := range []struct{ name, install string }{
		{"git", "git (apt-get install git): the test copies the files git lists"},
		{"make", "make (apt-get install make)"},
		{"curl", "curl (apt-get install curl): the service quick start calls the service with it"},
		{"docker", "Docker Engine (https://docs.docker.com/engine/install/)"},
	} {
		if _, err := exec.LookPath(tool.name); err != nil {
			t.Fatalf("README's commands need %s, not found on PATH: install %s", tool.name, tool.install)
		}
	}
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("README's commands need a running Docker engine (jobs run in containers): %v: %s", err, out)
	}
}

// repoRoot is the repository this test is in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module github.com/gleaner-net/gleaner\n")) {
		t.Fatalf("%s is not the repository's root (go.mod: %v)", root, err)
	}
	return root
}

// copyRepo copies the files git lists (tracked, and untracked but not
// ignored: what a commit of this tree would hold) into a directory of its
// own, with nothing beside it.
func copyRepo(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files in %s (the test copies what a clone would hold, so it needs a git checkout): %v", root, err)
	}
	dir := filepath.Join(t.TempDir(), "gleaner")
	n := 0
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src, dst := filepath.Join(root, name), filepath.Join(dir, name)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, dst)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := copyFile(src, dst, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("git ls-files listed no file in %s", root)
	}
	return dir
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// runner runs README lines in the copy through sh, as a user pastes them
// into a terminal, and keeps the last lines of their output for the log
// of a failure.
type runner struct {
	t    *testing.T
	dir  string
	tail *tail
}

func newRunner(t *testing.T, dir string) *runner {
	r := &runner{t: t, dir: dir, tail: &tail{max: tailLines}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last %d lines of the commands' output:\n%s", tailLines, r.tail.String())
		}
	})
	return r
}

// command makes the process for one line: its own process group (so that
// a Ctrl-C or a timeout reaches what it started), SIGINT at the context's
// end as a Ctrl-C would, and the environment of a user who never set
// gleaner's variables nor runs under another make.
func (r *runner) command(ctx context.Context, line string, stdout, stderr io.Writer) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = r.dir
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GLEANER_") || strings.HasPrefix(name, "MAKE") || name == "MFLAGS" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	r.tail.add("$ " + line)
	cmd.Stdout, cmd.Stderr = r.tail.writer(stdout), r.tail.writer(stderr)
	return cmd
}

// output is what a line printed: on stdout, and on both streams in the
// order written.
type output struct{ stdout, all string }

// run runs one line to its end; an error names the line, its exit status
// and how long it ran.
func (r *runner) run(ctx context.Context, line string) (output, error) {
	var stdout, all syncBuffer
	cmd := r.command(ctx, line, io.MultiWriter(&stdout, &all), &all)
	start := time.Now()
	err := cmd.Run()
	r.tail.flush()
	out := output{stdout.String(), all.String()}
	if ctx.Err() != nil || errors.Is(err, exec.ErrWaitDelay) {
		// What it started may still run: a timeout's Ctrl-C was not
		// enough, or a child holds its output open.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		return out, fmt.Errorf("%s: still running after %v, stopped: %v", line, time.Since(start).Round(time.Second), err)
	}
	if err != nil {
		return out, fmt.Errorf("%s: %v after %v", line, err, time.Since(start).Round(100*time.Millisecond))
	}
	return out, nil
}

// background is a line running until it is interrupted, as testnet up in
// its own terminal.
type background struct {
	line           string
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	err            error
}

// start starts a line in the background; exec makes the process that gets
// the Ctrl-C the command itself, not a shell around it.
func (r *runner) start(line string) *background {
	b := &background{line: line, done: make(chan struct{})}
	b.cmd = r.command(context.Background(), "exec "+line, &b.stdout, &b.stderr)
	if b.err = b.cmd.Start(); b.err != nil {
		close(b.done)
		return b
	}
	go func() {
		b.err = b.cmd.Wait()
		r.tail.flush()
		close(b.done)
	}()
	// A test that fails on the way still stops it as a user would, so
	// that its nodes stop their containers.
	r.t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.interrupt()
		}
	})
	return b
}

// waitFor waits until ok, failing if the command ends first or ctx does.
func (b *background) waitFor(ctx context.Context, ok func() bool) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		select {
		case <-b.done:
			return fmt.Errorf("exited (%v) before it was up", b.err)
		case <-ctx.Done():
			_ = b.interrupt()
			return errors.New("not up in time; stopped with a Ctrl-C")
		case <-tick.C:
		}
	}
	return nil
}

// interrupt is a Ctrl-C: SIGINT to the command's process group; it must
// exit 0 within stopLimit.
func (b *background) interrupt() error {
	if b.cmd.Process == nil {
		return b.err
	}
	if err := syscall.Kill(-b.cmd.Process.Pid, syscall.SIGINT); err != nil {
		return err
	}
	select {
	case <-b.done:
		return b.err
	case <-time.After(stopLimit):
		b.stop()
		return fmt.Errorf("still running %v after Ctrl-C; killed", stopLimit)
	}
}

// stop kills what is left of the command.
func (b *background) stop() {
	if b.cmd.Process != nil {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
}

// tail keeps the last max lines written through its writers.
type tail struct {
	mu      sync.Mutex
	max     int
	lines   []string
	writers []*lineWriter
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(line)
}

func (t *tail) addLocked(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

// writer is an io.Writer that copies to also and keeps whole lines in the
// tail.
func (t *tail) writer(also io.Writer) io.Writer {
	w := &lineWriter{t: t, also: also}
	t.mu.Lock()
	t.writers = append(t.writers, w)
	t.mu.Unlock()
	return w
}

// flush keeps the writers' unfinished last lines.
func (t *tail) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range t.writers {
		if len(w.partial) > 0 {
			t.addLocked(string(w.partial))
			w.partial = nil
		}
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

type lineWriter struct {
	t       *tail
	also    io.Writer
	partial []byte // guarded by t.mu
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if _, err := w.also.Write(p); err != nil {
		return 0, err
	}
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.t.addLocked(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

// syncBuffer is a bytes.Buffer that a command's two output streams and
// the test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestReadmeNamesItsCommands checks, even under -short, that README.md
// still has every command TestReadmeCommands runs and that the test fills
// the quick start's placeholders.
func TestReadmeNamesItsCommands(t *testing.T) {
	cmds := readmeCommands(t, filepath.Join(repoRoot(t), "README.md"))
	for _, line := range cmds.service {
		filled, err := fill(line, "/tmp/a b/node03", "http://127.0.0.1:41587")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, repoPlaceholder) && !strings.Contains(filled, `'/tmp/a b/node03'`) {
			t.Errorf("%q: the repo is not filled in, quoted: %q", line, filled)
		}
	}
	if _, err := fill("curl <its URL>/v1/models", "", ""); err == nil {
		t.Error("a placeholder with nothing to fill it was filled")
	}
	if _, err := fill("gleaner --repo <your repo> peers", "r", "u"); err == nil {
		t.Error("a placeholder the test does not know passed")
	}
}
