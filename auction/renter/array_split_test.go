package renter

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Every file goes to exactly one shard, every shard gets one at least,
// and each shard's files come in path order.
func checkDeal(t *testing.T, sizes []uint64, shards int, deal [][]int) {
	t.Helper()
	if len(deal) != shards {
		t.Fatalf("%d shards dealt, want %d", len(deal), shards)
	}
	seen := make([]int, len(sizes))
	for s, fs := range deal {
		if len(fs) == 0 {
			t.Errorf("shard %d got no file", s)
		}
		if !slices.IsSorted(fs) {
			t.Errorf("shard %d's files %v are not in path order", s, fs)
		}
		for _, f := range fs {
			seen[f]++
		}
	}
	for f, n := range seen {
		if n != 1 {
			t.Errorf("file %d dealt %d times", f, n)
		}
	}
}

func TestDealFilesByHand(t *testing.T) {
	// Largest first onto the lightest: 9 -> s0, 7 -> s1, 5 -> s2, 4 -> s2
	// (5 is lightest), 3 -> s1 (7), 1 -> s0 (9 vs 10 vs 9: s0 by index).
	sizes := []uint64{1, 3, 4, 5, 7, 9}
	deal, err := DealFiles(sizes, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 5}, {1, 4}, {2, 3}}
	if !reflect.DeepEqual(deal, want) {
		t.Fatalf("dealt %v, want %v", deal, want)
	}
	checkDeal(t, sizes, 3, deal)
}

// Empty files still reach every shard: equal bytes go to the shard with
// fewer files.
func TestDealFilesEmptyFilesReachEveryShard(t *testing.T) {
	sizes := []uint64{0, 0, 0, 0, 100}
	deal, err := DealFiles(sizes, 4)
	if err != nil {
		t.Fatal(err)
	}
	checkDeal(t, sizes, 4, deal)
	if !reflect.DeepEqual(deal[0], []int{4}) {
		t.Errorf("the large file shares shard 0: %v", deal)
	}
}

func TestDealFilesRefusesMoreShardsThanFiles(t *testing.T) {
	if _, err := DealFiles([]uint64{1, 2}, 3); !errors.Is(err, ErrTooFewFiles) {
		t.Fatalf("3 shards of 2 files: %v", err)
	}
	if _, err := DealFiles(nil, 1); !errors.Is(err, ErrTooFewFiles) {
		t.Fatalf("no files: %v", err)
	}
	if _, err := DealFiles([]uint64{1}, 0); err == nil {
		t.Fatal("0 shards accepted")
	}
}

// On random inputs: a whole cover, the same deal twice, and the greedy's
// bound: no shard heavier than the average plus the largest file.
func TestDealFilesCoversOnceAndBalances(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	for range 200 {
		n := 1 + rng.IntN(300)
		shards := 1 + rng.IntN(n)
		sizes := make([]uint64, n)
		var total, largest uint64
		for i := range sizes {
			sizes[i] = uint64(rng.IntN(1 << 20))
			if rng.IntN(10) == 0 {
				sizes[i] = 0
			}
			total += sizes[i]
			largest = max(largest, sizes[i])
		}
		deal, err := DealFiles(sizes, shards)
		if err != nil {
			t.Fatal(err)
		}
		checkDeal(t, sizes, shards, deal)
		again, _ := DealFiles(slices.Clone(sizes), shards)
		if !reflect.DeepEqual(deal, again) {
			t.Fatal("the same files dealt two ways")
		}
		for s, fs := range deal {
			var b uint64
			for _, f := range fs {
				b += sizes[f]
			}
			if b*uint64(shards) > total+largest*uint64(shards) {
				t.Fatalf("shard %d holds %d bytes; average %d, largest file %d", s, b, total/uint64(shards), largest)
			}
		}
	}
}
