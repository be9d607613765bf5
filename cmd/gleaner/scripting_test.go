package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// jsonError is what a failure prints on stderr under --json.
type jsonError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Hint    string `json:"hint"`
		RPCCode int    `json:"rpc_code"`
	} `json:"error"`
}

// leafPaths is every command of the app that has no subcommands, as the
// words that run it ("offer", "set").
func leafPaths() [][]string {
	var out [][]string
	var walk func(cmds []*cli.Command, path []string)
	walk = func(cmds []*cli.Command, path []string) {
		for _, c := range cmds {
			p := append(append([]string(nil), path...), c.Name)
			if len(c.Subcommands) == 0 {
				out = append(out, p)
			}
			walk(c.Subcommands, p)
		}
	}
	walk(newApp(io.Discard, io.Discard).Commands, nil)
	return out
}

// mustUsageText checks the contract's usage error: exit 2, nothing on
// stdout, exactly "gleaner: want" and "hint: see `gleaner PATH --help`"
// (hintPrefix) on stderr.
func mustUsageText(t *testing.T, r result, what, want, hintPrefix string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if r.code != 2 || r.stdout != "" || len(lines) != 2 || lines[0] != "gleaner: "+want ||
		!strings.HasPrefix(lines[1], "hint: "+hintPrefix) || strings.Contains(r.stderr, "Incorrect Usage") {
		t.Errorf("%s: exit %d\nstdout: %q\nstderr: %q\nwant exit 2, no stdout, %q and a hint starting %q",
			what, r.code, r.stdout, r.stderr, "gleaner: "+want, "hint: "+hintPrefix)
	}
}

// mustJSONError checks a failure under --json: exit code, nothing on
// stdout, stderr one JSON object {"error": {...}}; it returns the object.
func mustJSONError(t *testing.T, r result, what string, code int) jsonError {
	t.Helper()
	var e jsonError
	dec := json.NewDecoder(strings.NewReader(r.stderr))
	err := dec.Decode(&e)
	var extra json.RawMessage
	if r.code != code || r.stdout != "" || err != nil || dec.Decode(&extra) != io.EOF || e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("%s: exit %d (want %d)\nstdout: %q\nstderr: %q\nwant one JSON error object with code %d", what, r.code, code, r.stdout, r.stderr, code)
	}
	return e
}

func TestScriptingContract(t *testing.T) {
	none := filepath.Join(t.TempDir(), "no-repo")
	leaves := leafPaths()
	if len(leaves) < 40 {
		t.Fatalf("only %d leaf commands found: %v", len(leaves), leaves)
	}
	for _, path := range leaves {
		name := strings.Join(path, " ")
		hint := "see `gleaner " + name + " --help`"
		r := gleaner(t, append(path, "--bogus")...)
		mustUsageText(t, r, name+" --bogus", "unknown flag --bogus", hint)
		// --repo after the subcommand is the app's flag, for every command.
		r = gleaner(t, append(path, "--repo", none, "--bogus", "--json")...)
		e := mustJSONError(t, r, name+" --repo DIR --bogus --json", 2)
		if e.Error.Message != "unknown flag --bogus" || e.Error.Hint != hint {
			t.Errorf("%s --repo DIR --bogus --json: %q; want message %q and hint %q", name, r.stderr, "unknown flag --bogus", hint)
		}
	}
	// Commands with subcommands: flags and unknown subcommands.
	mustUsageText(t, gleaner(t, "offer", "--bogus"), "offer --bogus", "unknown flag --bogus", "see `gleaner offer --help`")
	mustUsageText(t, gleaner(t, "job", "bogus"), "job bogus", `unknown command "bogus"`, "see `gleaner job --help`")
	mustUsageText(t, gleaner(t, "offer", "set", "--max-temp", "hot"), "offer set --max-temp hot",
		`invalid value "hot" for --max-temp: parse error`, "see `gleaner offer set --help`")
	mustUsageText(t, gleaner(t, "sim", "convert"), "sim convert", "--from is required", "see `gleaner sim convert --help`")

	t.Run("help", func(t *testing.T) {
		for _, tc := range []struct{ help, flag []string }{
			{[]string{"help"}, []string{"--help"}},
			{[]string{"help", "offer"}, []string{"offer", "--help"}},
			{[]string{"help", "offer", "set"}, []string{"offer", "set", "--help"}},
			{[]string{"offer", "help", "set"}, []string{"offer", "set", "--help"}},
			{[]string{"job", "help"}, []string{"job", "--help"}},
		} {
			h, f := gleaner(t, tc.help...), gleaner(t, tc.flag...)
			mustOK(t, h, strings.Join(tc.help, " "))
			if h.stdout != f.stdout || !strings.Contains(h.stdout, "USAGE:") {
				t.Errorf("%v printed\n%s\nwant what %v prints:\n%s", tc.help, h.stdout, tc.flag, f.stdout)
			}
		}
		mustUsageText(t, gleaner(t, "help", "bogus"), "help bogus", `unknown command "bogus"`, "see `gleaner --help`")
		mustUsageText(t, gleaner(t, "help", "offer", "bogus"), "help offer bogus", `unknown command "bogus"`, "see `gleaner offer --help`")
		e := mustJSONError(t, gleaner(t, "help", "bogus", "--json"), "help bogus --json", 2)
		if e.Error.Message != `unknown command "bogus"` {
			t.Errorf("help bogus --json: %+v", e)
		}
	})

	t.Run("global flags after the subcommand", func(t *testing.T) {
		fresh := filepath.Join(t.TempDir(), "fresh")
		r := gleaner(t, "init", "--repo", fresh, "--network", "local")
		mustOK(t, r, "init --repo DIR")
		if _, err := os.Stat(filepath.Join(fresh, "identity.key")); err != nil {
			t.Fatalf("init --repo DIR made no repo there: %v", err)
		}
		r = gleaner(t, "init", "--network", "local", "--json", "--repo="+fresh)
		e := mustJSONError(t, r, "second init --json", 1)
		if !strings.Contains(e.Error.Message, "already exists") || e.Error.Hint == "" {
			t.Errorf("second init --json: %q", r.stderr)
		}
		r = gleaner(t, "id", "--repo", none, "--json")
		e = mustJSONError(t, r, "id --json without a repo", 1)
		if !strings.Contains(e.Error.Message, none) || !strings.Contains(e.Error.Hint, "gleaner init") || e.Error.RPCCode != 0 {
			t.Errorf("id --json without a repo: %q", r.stderr)
		}
	})

	repo := initRepo(t)
	d := startDaemon(t, repo)

	t.Run("global flags with a daemon", func(t *testing.T) {
		for _, args := range [][]string{
			{"--repo", repo, "id", "--json"},
			{"id", "--repo", repo, "--json"},
			{"id", "--json", "--repo", repo},
			{"--json", "id", "--repo", repo},
			{"rpc", "--json", "node_info", "--repo", repo},
			{"--repo", repo, "rpc", "node_info", "--json"},
		} {
			r := gleaner(t, args...)
			mustOK(t, r, strings.Join(args, " "))
			var info struct {
				PeerID string `json:"peer_id"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.PeerID != d.peerID {
				t.Errorf("%v: %v\n%s", args, err, r.stdout)
			}
		}
	})

	t.Run("job submit prints the ID", func(t *testing.T) {
		spec := filepath.Join(t.TempDir(), "job.yaml")
		if err := os.WriteFile(spec, []byte(demoSpec("scripted", "silver", "1s", 1, 0)), 0o600); err != nil {
			t.Fatal(err)
		}
		r := gleaner(t, "job", "submit", spec, "--repo", repo)
		mustOK(t, r, "job submit")
		id := strings.TrimSuffix(r.stdout, "\n")
		if id == "" || strings.ContainsAny(id, " \t\n") || !strings.Contains(r.stderr, "gleaner job logs -f "+id) {
			t.Fatalf("job submit: stdout %q (want only the ID), stderr %q", r.stdout, r.stderr)
		}
		r = gleaner(t, "--repo", repo, "job", "status", id, "--json")
		mustOK(t, r, "job status of the submitted ID")
	})

	t.Run("RPC errors in CLI words", func(t *testing.T) {
		r := gleaner(t, "--repo", repo, "offer", "set", "--price.bronze", "cheap")
		if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, "gleaner: ") || !strings.Contains(r.stderr, "--price.bronze") ||
			strings.Contains(r.stderr, "price_bronze") || strings.Contains(r.stderr, "(code") {
			t.Errorf("bad price: exit %d, stderr %q; want exit 2 naming --price.bronze, without the RPC's field name or code", r.code, r.stderr)
		}
		r = gleaner(t, "--repo", repo, "offer", "set", "--tz", "Mars/Olympus", "--json")
		e := mustJSONError(t, r, "bad --tz --json", 2)
		if e.Error.RPCCode != -32602 || !strings.Contains(e.Error.Message, "--tz") || strings.Contains(e.Error.Message, "(code") {
			t.Errorf("bad --tz --json: %q; want rpc_code -32602 and a message naming --tz", r.stderr)
		}
		r = gleaner(t, "--repo", repo, "job", "status", "no-such-job")
		if r.code == 0 || strings.Contains(r.stderr, "(code") {
			t.Errorf("job status of an unknown job: exit %d, stderr %q; want a failure without the RPC code", r.code, r.stderr)
		}
	})
}
