package main

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
)

// TestDataAcrossThreeDaemons is issue 14's data path from the CLI: A adds
// a tree (--public), B pins it from A (--public, so it serves it on), A is
// killed, C gets it from B alone (a third peer serving what it fetched), B
// is crashed and restarted and still holds and serves it, and rm frees
// it. Bad input fails with exit code 2.
func TestDataAcrossThreeDaemons(t *testing.T) {
	src := filepath.Join(t.TempDir(), "dataset")
	files := writeTree(t, src)

	a := newNode(t, "a")
	add := a.cli(t, "data", "add", "--public", src)
	mustOK(t, add, "a: data add")
	root := strings.TrimSpace(add.stdout)
	if !strings.HasPrefix(root, "bafy") || strings.Contains(root, "\n") {
		t.Fatalf("data add printed %q on stdout, want only the CID", add.stdout)
	}

	b := newNode(t, "b", "--bootstrap", a.d.addrs[0])
	var pinned node.DataFetchResult
	decodeJSON(t, b.cli(t, "data", "pin", "--json", "--public", "--timeout", "60s", root), "b: data pin", &pinned)
	if pinned.CID != root || !pinned.Fetched || pinned.Bytes <= 0 || !pinned.Public {
		t.Fatalf("b: data pin = %+v, want %s fetched from a peer", pinned, root)
	}

	a.stop(t, syscall.SIGKILL)
	c := newNode(t, "c", "--bootstrap", b.d.addrs[0])
	out := filepath.Join(t.TempDir(), "copy")
	mustOK(t, c.cli(t, "data", "get", "--timeout", "60s", root, out), "c: data get from b")
	checkTree(t, out, files)

	b.restart(t, syscall.SIGKILL)
	var ls node.DataListResult
	decodeJSON(t, b.cli(t, "data", "ls", "--json"), "b: data ls after the crash", &ls)
	if len(ls.Pins) != 1 || ls.Pins[0].CID != root || ls.Pins[0].Bytes != pinned.Bytes || ls.UsedBytes < pinned.Bytes {
		t.Fatalf("b after a crash: %+v, want the pin of %s (%d bytes)", ls, root, pinned.Bytes)
	}
	again := filepath.Join(t.TempDir(), "again")
	var got node.DataFetchResult
	decodeJSON(t, b.cli(t, "data", "get", "--json", root, again), "b: data get after the crash", &got)
	if got.Fetched {
		t.Errorf("b fetched %s again after the restart; it should have had every block", root)
	}
	checkTree(t, again, files)

	var rm node.DataGCResult
	decodeJSON(t, b.cli(t, "data", "rm", "--json", root), "b: data rm", &rm)
	if rm.FreedBytes < pinned.Bytes || rm.UsedBytes != 0 {
		t.Errorf("b: data rm = %+v, want at least %d bytes freed and nothing left", rm, pinned.Bytes)
	}

	for _, bad := range [][]string{
		{"data", "pin", "not-a-cid"},
		{"data", "get", root, out}, // exists already
		{"data", "add", filepath.Join(src, "missing")},
		{"data", "pin", "--timeout", "0s", root},
	} {
		r := b.cli(t, bad...)
		if r.code != exitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and a line or two", bad, r.code, r.stderr)
		}
	}
	if r := b.cli(t, "data", "rm", root); r.code != exitFailure || !strings.Contains(r.stderr, "not pinned") {
		t.Errorf("rm of what is no longer pinned: exit %d, stderr %q", r.code, r.stderr)
	}
	// Nobody holds this one: a clear failure within the timeout, no pin.
	nobody := nobodyCID(t)
	r := c.cli(t, "data", "pin", "--timeout", "2s", nobody)
	if r.code != exitFailure || !strings.Contains(r.stderr, "no peer") {
		t.Errorf("pin of a CID nobody has: exit %d, stderr %q", r.code, r.stderr)
	}
}

// writeTree writes a small tree with a file of several chunks and returns
// each file's bytes by relative path.
func writeTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	rng := rand.New(rand.NewSource(14))
	big := make([]byte, 3<<20+123)
	rng.Read(big)
	files := map[string][]byte{
		"weights.bin":      big,
		"README":           []byte("a dataset for the data test\n"),
		"shards/part-0000": bytes.Repeat([]byte("row\n"), 5000),
		"shards/empty":     {},
	}
	for rel, b := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func checkTree(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		rel, _ := filepath.Rel(dir, p)
		got, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if w, ok := want[filepath.ToSlash(rel)]; !ok || !bytes.Equal(got, w) {
			t.Errorf("%s: %d bytes, not the original (known: %v)", rel, len(got), ok)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Errorf("%s holds %d files, want %d", dir, n, len(want))
	}
}

func decodeJSON(t *testing.T, r result, what string, v any) {
	t.Helper()
	mustOK(t, r, what)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, r.stdout)
	}
}

// TestPrivateDataRefusedFromTheCLI: what `data add` imports without
// --public is private: `data ls` says so, a stranger's `data get` ends in
// seconds with a refusal (exit 1), not at its timeout, and gets nothing;
// once the owner publishes it (`data pin --public` of what it holds) the
// stranger gets it, and the owner's restart keeps it public.
func TestPrivateDataRefusedFromTheCLI(t *testing.T) {
	src := filepath.Join(t.TempDir(), "dataset")
	files := writeTree(t, src)
	owner := newNode(t, "owner")
	var add node.DataFetchResult
	decodeJSON(t, owner.cli(t, "data", "add", "--json", src), "owner: data add", &add)
	if add.Public {
		t.Fatalf("data add without --public = %+v, want private", add)
	}
	var ls node.DataListResult
	decodeJSON(t, owner.cli(t, "data", "ls", "--json"), "owner: data ls", &ls)
	if len(ls.Pins) != 1 || ls.Pins[0].Public {
		t.Fatalf("owner: data ls = %+v, want one private pin", ls)
	}
	if r := owner.cli(t, "data", "ls"); !strings.Contains(r.stdout, "private") {
		t.Errorf("data ls does not say the pin is private:\n%s", r.stdout)
	}

	stranger := newNode(t, "stranger", "--bootstrap", owner.d.addrs[0])
	out := filepath.Join(t.TempDir(), "stolen")
	began := time.Now()
	r := stranger.cli(t, "data", "get", "--timeout", "60s", add.CID, out)
	if r.code != exitFailure || !strings.Contains(r.stderr, "refused") || !strings.Contains(r.stderr, add.CID) {
		t.Fatalf("stranger: data get of private data: exit %d, stderr %q; want a refusal naming the CID", r.code, r.stderr)
	}
	if took := time.Since(began); took > 40*time.Second {
		t.Errorf("the refusal took %s; it should come in seconds, not at the timeout", took)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the stranger's refused get wrote files")
	}

	decodeJSON(t, owner.cli(t, "data", "ls", "--json"), "owner: data ls after the refusal", &ls)
	if ls.RefusedWants == 0 {
		t.Error("the owner counted no refused want after the stranger's get")
	}

	var pub node.DataFetchResult
	decodeJSON(t, owner.cli(t, "data", "pin", "--json", "--public", add.CID), "owner: data pin --public", &pub)
	if !pub.Public || pub.Fetched {
		t.Fatalf("owner: data pin --public of what it holds = %+v, want it public and nothing fetched", pub)
	}
	owner.restart(t, syscall.SIGKILL)
	decodeJSON(t, owner.cli(t, "data", "ls", "--json"), "owner: data ls after a crash", &ls)
	if len(ls.Pins) != 1 || !ls.Pins[0].Public {
		t.Fatalf("owner after a crash: data ls = %+v, want the pin public still", ls)
	}
	// A new node, since the owner's restart broke the stranger's link.
	other := newNode(t, "other", "--bootstrap", owner.d.addrs[0])
	mustOK(t, other.cli(t, "data", "get", "--timeout", "60s", add.CID, out), "a stranger: data get of published data")
	checkTree(t, out, files)
}
