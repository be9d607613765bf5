package data

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/gleaner-net/gleaner/auction/renter"
)

// BenchmarkArraySplit measures an array's split (array.split) against
// importing the same input, in one run: "import" adds a tree of files
// (the renter's `src:` input at submit) and "split" lists it, deals it
// over the shards and builds each shard's directory (what the renter's
// node adds to a submit). The split's extra-bytes is what it wrote to the
// store per byte of the input: its directory nodes only, since the
// files' blocks are linked, not copied. 400 files of 16 KiB over 16
// shards by default; GLEANER_SPLIT_BENCH_FILES sets the files.
func BenchmarkArraySplit(b *testing.B) {
	files := 400
	if s := os.Getenv("GLEANER_SPLIT_BENCH_FILES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 16 {
			b.Fatalf("GLEANER_SPLIT_BENCH_FILES=%q: want a whole number of 16 or more", s)
		}
		files = n
	}
	const shards, size = 16, 16 << 10
	src := b.TempDir() + "/in"
	tree := map[string]string{}
	for i := range files {
		tree[fmt.Sprintf("part-%02d/file-%05d.bin", i%20, i)] = noise(uint64(i), size+i)
	}
	writeFiles(b, src, tree)
	ctx := context.Background()

	b.Run("import", func(b *testing.B) {
		for range b.N {
			s := benchStore(b)
			if _, err := s.Add(ctx, src); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
	b.Run(fmt.Sprintf("split-%d", shards), func(b *testing.B) {
		var ratio float64
		for range b.N {
			// Each split into a fresh store holding only the input, so
			// that every one writes its directories anew.
			b.StopTimer()
			s := benchStore(b)
			root, err := s.Add(ctx, src)
			if err != nil {
				b.Fatal(err)
			}
			input := s.Used()
			b.StartTimer()
			list, err := s.ListFiles(ctx, root, 10*files)
			if err != nil {
				b.Fatal(err)
			}
			sizes := make([]uint64, len(list))
			for i, f := range list {
				sizes[i] = f.Size
			}
			deal, err := renter.DealFiles(sizes, shards)
			if err != nil {
				b.Fatal(err)
			}
			for _, idx := range deal {
				part := make([]DirFile, len(idx))
				for k, f := range idx {
					part[k] = list[f]
				}
				if _, err := s.AddSubset(ctx, root, part); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			ratio = float64(s.Used()-input) / float64(input)
			s.Close()
			b.StartTimer()
		}
		b.ReportMetric(ratio, "extra-bytes/input-byte")
	})
}

func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := OpenStore(b.TempDir(), 1<<30)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
