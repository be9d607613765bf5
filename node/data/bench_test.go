package data

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	mdtest "github.com/ipfs/boxo/ipld/merkledag/test"
)

// benchMiB is the file the benchmarks import: 64 MiB by default, so that
// `make bench-smoke` stays quick on two cores; GLEANER_DATA_BENCH_MIB=1024
// measures the 1 GiB of issue 14.
func benchMiB(b *testing.B) int64 {
	if s := os.Getenv("GLEANER_DATA_BENCH_MIB"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("GLEANER_DATA_BENCH_MIB=%q: want a positive whole number of MiB", s)
		}
		return n
	}
	return 64
}

// peakHeap samples the heap in use (runtime.MemStats.HeapInuse) every
// few milliseconds from a goroutine, after a GC so that what came before
// does not count, until the returned stop is called; stop reports the
// highest sample as the benchmark's peak-heap-MiB. Run at the default size
// and at GLEANER_DATA_BENCH_MIB=1024, equal peaks show memory bounded
// independently of the file's size.
func peakHeap(b *testing.B) (stop func()) {
	b.Helper()
	runtime.GC()
	var peak uint64
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapInuse)
	}
	sample()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	}
}

func benchFile(b *testing.B) (string, int64) {
	size := benchMiB(b) << 20
	p := filepath.Join(b.TempDir(), "input.bin")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	buf := make([]byte, 1<<20)
	for written := int64(0); written < size; written += int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			v := rng.Uint64()
			for k := 0; k < 8; k++ {
				buf[i+k] = byte(v >> (8 * k))
			}
		}
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return p, size
}

// BenchmarkImport measures chunking, hashing and encoding a file as
// UnixFS (into an in-memory DAG store, so that the store's disk does not
// count); BenchmarkReadLimit reads the same file with nothing else, the
// limit an import is compared with.
func BenchmarkImport(b *testing.B) {
	p, size := benchFile(b)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Import(context.Background(), mdtest.Mock(), p, CIDv1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadLimit(b *testing.B) {
	p, size := benchFile(b)
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkExport writes a file's DAG back out, as `gleaner job fetch`
// will once the blocks are local.
func BenchmarkExport(b *testing.B) {
	p, size := benchFile(b)
	dag := mdtest.Mock()
	c, err := Import(context.Background(), dag, p, CIDv1)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst := filepath.Join(dir, strconv.Itoa(i))
		if err := Export(context.Background(), dag, c, dst, ExportLimits{MaxBytes: 1 << 40, MaxEntries: 10}); err != nil {
			b.Fatal(err)
		}
		os.Remove(dst)
	}
}

// BenchmarkStoreAdd imports into the on-disk store, as a provider caching
// a dataset or a renter offering its inputs does; each round starts from
// an empty store so that no block deduplicates.
func BenchmarkStoreAdd(b *testing.B) {
	p, size := benchFile(b)
	b.SetBytes(size)
	stop := peakHeap(b)
	defer stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, err := OpenStore(filepath.Join(b.TempDir(), strconv.Itoa(i)), 4*size)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := s.Add(context.Background(), p); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}
