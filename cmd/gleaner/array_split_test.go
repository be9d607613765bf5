package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/node/renting"
)

// splitCorpus is an input of seven files of very different sizes, some
// in subdirectories, one empty.
func splitCorpus(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{
		"big.bin":       []byte(strings.Repeat("B", 600_000)),
		"a.txt":         []byte("alpha\n"),
		"c.txt":         []byte(strings.Repeat("c", 40_000)),
		"sub/d.txt":     []byte(strings.Repeat("d", 250_000)),
		"sub/empty":     {},
		"sub/deep/e.md": []byte("echo\n"),
		"z.json":        []byte(`{"z": 1}`),
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

func splitSpec(t *testing.T, dir, name string, shards int) string {
	t.Helper()
	spec := fmt.Sprintf("name: %s\nimage: %s\ncommand: [\"-read\", \"/data\", \"-write\", \"/outputs\", \"-lines\", \"1\"]\n"+
		"resources: {gpus: 1}\ntier: silver\nmax_price: 1.00\nduration: {max: 10m}\nallow_simulated: true\n"+
		"inputs: [{src: ./corpus, path: /data}]\noutputs: {path: /outputs, max_size: 16MiB}\n"+
		"array: {shards: %d, max_parallel: 2, split: {input: /data, by: file}}\n", name, shardImage, shards)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// An array that splits its input: each shard's container sees at /data
// only its files (its listing, written to its outputs and fetched, says
// so), every file of the input is seen by exactly one shard with its
// bytes intact, and more shards than files is refused at submit, naming
// array.split, before anything is bought.
func TestJobArraySplitGivesEachShardItsFiles(t *testing.T) {
	waitsOnItsOwnJobs(t)
	buildShardImage(t)
	p := provider(t, "p1", "2xRTX4090") // two shards at once (max_parallel: 2)
	rn := startRenter(t, p)
	all := []*rnode{p, rn}
	dir := t.TempDir()
	files := splitCorpus(t, filepath.Join(dir, "corpus"))

	refused := rn.cli(t, "job", "submit", splitSpec(t, dir, "toomany", 8))
	if refused.code == 0 || !strings.Contains(refused.stderr, "array.split: input /data") || !strings.Contains(refused.stderr, "it holds 7 files, fewer than array.shards (8)") {
		t.Fatalf("8 shards of 7 files: exit %d, %q", refused.code, refused.stderr)
	}
	if ls := rn.cli(t, "job", "ls"); strings.Contains(ls.stdout, "toomany") {
		t.Fatalf("the refused array was recorded:\n%s", ls.stdout)
	}

	// job run --json streams the progress, an object a line, the last
	// the final state with the array's record.
	r := rn.cli(t, "job", "run", "--json", splitSpec(t, dir, "split", 3))
	mustOK(t, r, "job run --json split.yaml\n"+tails(all))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var last ArrayProgress
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("job run --json, line %d: %v: %q", i, err, l)
		}
		if (last.Type == "final") != (i == len(lines)-1) {
			t.Fatalf("line %d of %d is of type %s", i, len(lines), last.Type)
		}
	}
	if last.Array == nil || last.State != renting.StateCompleted || last.Done != 3 {
		t.Fatalf("the final object: %+v", last)
	}
	id := last.ID
	v := last.Array.ArrayView
	if v.Done != 3 || len(v.ShardJobs) != 3 {
		t.Fatalf("array %s: %s", id, v.Line())
	}
	out := filepath.Join(t.TempDir(), "results")
	mustOK(t, rn.cli(t, "job", "fetch", id, out), "job fetch "+id)

	seen := map[string]int{}
	inputs := map[string]bool{}
	for _, sh := range v.ShardJobs {
		listing, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("shard-%d", sh.Index), "inputs.txt"))
		if err != nil {
			t.Fatalf("shard %d's listing: %v", sh.Index, err)
		}
		n := 0
		for _, l := range strings.Split(string(listing), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 || f[0] != "input" || f[1] == "writable:" {
				continue
			}
			n++
			seen[f[1]]++
			if b, ok := files[f[1]]; !ok || f[2] != fmt.Sprintf("%x", sha256.Sum256(b)) {
				t.Errorf("shard %d saw %s (%s), not a file of the input as given", sh.Index, f[1], f[2])
			}
		}
		if n == 0 || n != sh.Files {
			t.Errorf("shard %d saw %d files; its record deals it %d", sh.Index, n, sh.Files)
		}
		if sh.Input == "" || inputs[sh.Input] {
			t.Errorf("shard %d's directory %q: empty or another shard's", sh.Index, sh.Input)
		}
		inputs[sh.Input] = true
	}
	for rel := range files {
		if seen[rel] != 1 {
			t.Errorf("%s was seen by %d shards, want exactly one", rel, seen[rel])
		}
	}
	if len(seen) != len(files) {
		t.Errorf("the shards saw %d distinct files, the input has %d: %v", len(seen), len(files), seen)
	}
	// The largest file has a shard of its own: 600 kB against 290 kB for
	// the other six together.
	for _, sh := range v.ShardJobs {
		if listing, _ := os.ReadFile(filepath.Join(out, fmt.Sprintf("shard-%d", sh.Index), "inputs.txt")); strings.Contains(string(listing), "input big.bin ") && sh.Files != 1 {
			t.Errorf("big.bin shares shard %d with %d other files", sh.Index, sh.Files-1)
		}
	}
}
