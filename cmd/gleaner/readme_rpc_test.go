package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMECurlExample issues the README's JSON-RPC example against a real
// daemon: the request it makes (method, URL, headers, body, with the
// repo's files read as the shell would) is built from README.md itself,
// so that an example that does not work, or stops working, fails here.
// Where curl is installed the snippet also runs as written, under sh.
func TestREADMECurlExample(t *testing.T) {
	snippet := readmeRPCSnippet(t)
	home := t.TempDir()
	repo := filepath.Join(home, ".gleaner") // the snippet's REPO=~/.gleaner
	mustOK(t, gleaner(t, "--repo", repo, "init", "--network", "local"), "init")
	d := startDaemon(t, repo)

	// The request, as curl would send it.
	args := curlArgs(t, snippet, repo)
	req := curlRequest(t, args)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("README request: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("README request (%s %s, Content-Type %q): HTTP %d: %s", req.Method, req.URL, req.Header.Get("Content-Type"), resp.StatusCode, body)
	}
	checkNodeInfo(t, "README request", body, d.peerID)

	// The snippet itself.
	if _, err := exec.LookPath("curl"); err != nil {
		t.Logf("curl is not on PATH: checked the request the README's example makes, not curl itself")
		return
	}
	cmd := exec.Command("sh", "-c", "set -e\n"+snippet)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("README snippet under sh: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	checkNodeInfo(t, "README snippet under sh", out, d.peerID)
}

// readmeRPCSnippet is the first sh block of the README's JSON-RPC section.
func readmeRPCSnippet(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i := strings.Index(text, "\n## The local JSON-RPC API\n")
	if i < 0 {
		t.Fatal("README.md has no section \"## The local JSON-RPC API\"")
	}
	text = text[i+1:]
	if next := strings.Index(text[3:], "\n## "); next >= 0 {
		text = text[:next+3]
	}
	start := strings.Index(text, "```sh\n")
	if start < 0 {
		t.Fatal("the README's JSON-RPC section has no ```sh block")
	}
	text = text[start+len("```sh\n"):]
	end := strings.Index(text, "```")
	if end < 0 {
		t.Fatal("the README's JSON-RPC sh block is not closed")
	}
	return text[:end]
}

// curlArgs finds the snippet's curl command and splits it into words as sh
// would, reading `$(cat $REPO/FILE)` from repo. Any other expansion fails
// the test: this harness would not know what it means.
func curlArgs(t *testing.T, snippet, repo string) []string {
	t.Helper()
	joined := strings.ReplaceAll(snippet, "\\\n", " ")
	var line string
	for _, l := range strings.Split(joined, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "curl ") {
			line = l
			break
		}
	}
	if line == "" {
		t.Fatalf("no curl command in the README's JSON-RPC example:\n%s", snippet)
	}
	expand := func(s string) string {
		for {
			i := strings.Index(s, "$(cat $REPO/")
			if i < 0 {
				break
			}
			j := strings.Index(s[i:], ")")
			if j < 0 {
				t.Fatalf("unclosed $( in %q", s)
			}
			name := s[i+len("$(cat $REPO/") : i+j]
			data, err := os.ReadFile(filepath.Join(repo, name))
			if err != nil {
				t.Fatalf("the example reads %s: %v", name, err)
			}
			s = s[:i] + strings.TrimRight(string(data), "\n") + s[i+j+1:]
		}
		if strings.Contains(s, "$") {
			t.Fatalf("the example uses an expansion this test does not know: %q", s)
		}
		return s
	}
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case ' ', '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unclosed ' in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+j]) // literal: no expansion
			i += j + 1
			inWord = true
		case '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				t.Fatalf("unclosed \" in %q", line)
			}
			cur.WriteString(expand(line[i+1 : i+1+j]))
			i += j + 1
			inWord = true
		default:
			if c == '$' || c == '\\' || c == '`' || c == '|' || c == '>' || c == ';' {
				t.Fatalf("the curl line has unquoted %q, which this test does not handle: %q", c, line)
			}
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words[1:] // after "curl"
}

// curlRequest is the request curl makes for args: -d means POST with the
// data as body and, unless a header says otherwise, curl's default
// Content-Type of application/x-www-form-urlencoded.
func curlRequest(t *testing.T, args []string) *http.Request {
	t.Helper()
	var url, data string
	hasData := false
	header := http.Header{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-s", "--silent", "-S", "--show-error", "-f", "--fail":
		case "-H", "--header", "-d", "--data", "--data-raw":
			if i+1 == len(args) {
				t.Fatalf("%s without a value in %q", a, args)
			}
			i++
			if a == "-H" || a == "--header" {
				k, v, ok := strings.Cut(args[i], ":")
				if !ok {
					t.Fatalf("header %q has no colon", args[i])
				}
				header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			} else {
				data, hasData = args[i], true
			}
		default:
			if strings.HasPrefix(a, "-") {
				t.Fatalf("curl option %q: this test does not know what curl sends for it", a)
			}
			if url != "" {
				t.Fatalf("two URLs in %q", args)
			}
			url = a
		}
	}
	if url == "" || !hasData {
		t.Fatalf("the example needs a URL and -d: %q", args)
	}
	if header.Get("Content-Type") == "" {
		header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(data))
	if err != nil {
		t.Fatalf("the example's URL %q: %v", url, err)
	}
	req.Header = header
	return req
}

func checkNodeInfo(t *testing.T, what string, body []byte, peerID string) {
	t.Helper()
	var reply struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   json.RawMessage `json:"error"`
		Result  struct {
			PeerID string `json:"peer_id"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &reply); err != nil {
		t.Fatalf("%s: reply is not one JSON-RPC response: %v\n%s", what, err, body)
	}
	if reply.Error != nil || reply.JSONRPC != "2.0" || string(reply.ID) != "1" || reply.Result.PeerID != peerID {
		t.Fatalf("%s: reply %s, want node_info's result for %s", what, body, peerID)
	}
}
