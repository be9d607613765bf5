package traces

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every trace the simulator and the benchmarks read is embedded, opens
// decompressed, and Dir holds the same bytes under the same names.
func TestEveryTraceIsEmbedded(t *testing.T) {
	want := []string{
		"alibaba_v2023_openb_node_list_gpu_node.csv", "alibaba_v2023_openb_pod_list_default.csv",
		"alibaba_v2025_disaggregated_DLRM_trace.csv", "alibaba_v2026_spot_node_info_df.csv",
		"availability_fits.json", "gpu_prices_vast_2026.csv",
	}
	if got := Names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("embedded traces %v, want %v", got, want)
	}
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range want {
		r, err := Open(n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil || len(b) < 500 {
			t.Fatalf("%s: %d bytes, %v", n, len(b), err)
		}
		onDisk, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || !bytes.Equal(onDisk, b) {
			t.Fatalf("%s in %s differs from the embedded one (%v)", n, dir, err)
		}
	}
	if _, err := Open("nope.csv"); err == nil {
		t.Fatal("a trace that is not embedded opened")
	}
}

// Nothing in the repository reads a path beside it: a fresh clone has
// nothing next to it (the development checkout's sibling data directory
// is not there), so the traces must come from here. The needles are built
// from parts so that this file, scanned like every other, does not name
// that directory itself.
func TestNothingReadsBesideTheRepository(t *testing.T) {
	sibling := "sha" + "red"
	needles := []string{".." + "/" + sibling, sibling + "/" + "traces"}
	root := filepath.Join("..", "..")
	err := filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() && (info.Name() == ".git" || info.Name() == "build" || info.Name() == "bin") {
			return filepath.SkipDir
		}
		if info.IsDir() || !(strings.HasSuffix(path, ".go") || info.Name() == "Makefile" || strings.HasSuffix(path, ".md")) {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for line := 1; sc.Scan(); line++ {
			for _, n := range needles {
				if strings.Contains(sc.Text(), n) {
					t.Errorf("%s:%d reads beside the repository: %s", path, line, strings.TrimSpace(sc.Text()))
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
