// Package traces holds the public workload, supply and price traces that
// the market simulator and the benchmarks run on, gzipped and embedded, so
// that a fresh clone (and the gleaner binary, from any directory) has them
// without anything beside the repository. README.md beside this file
// names each trace's source and licence. It imports nothing of gleaner.
package traces

import (
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

//go:embed data/*.gz
var data embed.FS

// Names lists the embedded traces by their file names (without .gz).
func Names() []string {
	entries, _ := fs.ReadDir(data, "data")
	var out []string
	for _, e := range entries {
		out = append(out, e.Name()[:len(e.Name())-len(".gz")])
	}
	sort.Strings(out)
	return out
}

// Open returns the trace name (e.g. "gpu_prices_vast_2026.csv"),
// decompressed.
func Open(name string) (io.ReadCloser, error) {
	f, err := data.Open("data/" + name + ".gz")
	if err != nil {
		return nil, fmt.Errorf("no embedded trace %q (have %v)", name, Names())
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("embedded trace %s: %w", name, err)
	}
	return readCloser{z, f}, nil
}

type readCloser struct {
	*gzip.Reader
	f fs.File
}

func (r readCloser) Close() error { r.Reader.Close(); return r.f.Close() }

var (
	dirOnce sync.Once
	dirPath string
	dirErr  error
)

// Dir is a directory holding every trace decompressed under its own name,
// for readers that take a path (the simulator's --traces). It is written
// once per content under the system's temporary directory (its name
// carries the traces' hash, and it appears whole, by rename, or not at
// all), and reused by later runs.
func Dir() (string, error) {
	dirOnce.Do(func() { dirPath, dirErr = materialise() })
	return dirPath, dirErr
}

func materialise() (string, error) {
	h := sha256.New()
	for _, n := range Names() {
		b, err := data.ReadFile("data/" + n + ".gz")
		if err != nil {
			return "", err
		}
		h.Write([]byte(n))
		h.Write(b)
	}
	dir := filepath.Join(os.TempDir(), "gleaner-traces-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, Names()[0])); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "gleaner-traces-partial-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // empty after a successful rename
	for _, n := range Names() {
		if err := extract(n, filepath.Join(tmp, n)); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process put it there first: theirs is the same content.
		if _, serr := os.Stat(filepath.Join(dir, Names()[0])); serr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("traces: %w", err)
	}
	return dir, nil
}

func extract(name, path string) error {
	r, err := Open(name)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("traces: %s: %w", name, err)
	}
	return f.Close()
}
