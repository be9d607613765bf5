package data

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// tarLimits are generous bounds for the benchmark file's tar.
var tarLimits = ExportLimits{MaxBytes: 1 << 40, MaxEntries: 10}

// benchTar streams a tar holding the benchmark file (as out/input.bin)
// through a pipe, as a provider copying a job's output volume out does:
// nothing of the stream is held in memory.
func benchTar(p string, size int64) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		f, err := os.Open(p)
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		defer f.Close()
		tw := tar.NewWriter(pw)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "out/", Mode: 0o755}); err != nil {
			pw.CloseWithError(err)
			return
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "out/input.bin", Size: size, Mode: 0o644}); err != nil {
			pw.CloseWithError(err)
			return
		}
		if _, err := io.Copy(tw, f); err != nil {
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(tw.Close())
	}()
	return pr
}

// BenchmarkAddTar imports a tar stream of a job's outputs (the benchmark
// file, benchMiB) into a fresh on-disk store each round, as a provider
// does when a job ends.
func BenchmarkAddTar(b *testing.B) {
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
		r := benchTar(p, size)
		b.StartTimer()
		res, err := s.AddTar(context.Background(), r, tarLimits)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if res.Bytes != size {
			b.Fatalf("AddTar took %d bytes, want %d", res.Bytes, size)
		}
		r.Close()
		s.Close()
		b.StartTimer()
	}
}

// BenchmarkWriteTar streams the benchmark file's DAG out of an on-disk
// store as tar, as a provider filling a job's input volume does.
func BenchmarkWriteTar(b *testing.B) {
	p, size := benchFile(b)
	s, err := OpenStore(filepath.Join(b.TempDir(), "blocks"), 4*size)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := s.AddWrapped(context.Background(), p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	stop := peakHeap(b)
	defer stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var n countWriter
		if err := WriteTar(context.Background(), s.DAG(), c, &n, tarLimits); err != nil {
			b.Fatal(err)
		}
		if int64(n) < size {
			b.Fatalf("tar is %d bytes, less than the file's %d", n, size)
		}
	}
}

// countWriter discards what it is given and counts it.
type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) {
	*w += countWriter(len(p))
	return len(p), nil
}
