package renter

import (
	"container/heap"
	"errors"
	"fmt"
	"sort"
)

// ErrTooFewFiles is wrapped by DealFiles when there are fewer files than
// shards: some shard would get nothing, and a shard with no work is
// bought for nothing.
var ErrTooFewFiles = errors.New("fewer files than shards")

// DealFiles deals files, given by their sizes in the order of their
// sorted paths, over shards shards, and returns each shard's files as
// indexes into sizes, ascending (so in path order). Every file goes to
// exactly one shard and every shard gets at least one.
//
// It balances by size the way a greedy scheduler of jobs on machines
// does (longest processing time first): the largest file goes onto the
// lightest shard, ties broken by fewer files and then the lower shard
// index, and files of one size by path, so the same files and shards
// deal the same way on every node and after every restart. The heaviest
// shard is then within 4/3 of the best split possible, and no heavier
// than the average plus the largest file.
func DealFiles(sizes []uint64, shards int) ([][]int, error) {
	if shards < 1 {
		return nil, fmt.Errorf("%d shards: want at least 1", shards)
	}
	if len(sizes) < shards {
		return nil, fmt.Errorf("%w: %d files for %d shards", ErrTooFewFiles, len(sizes), shards)
	}
	order := make([]int, len(sizes))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return sizes[order[a]] > sizes[order[b]] })
	h := make(loads, shards)
	for i := range h {
		h[i] = &load{shard: i}
	}
	heap.Init(&h)
	out := make([][]int, shards)
	for _, f := range order {
		l := h[0] // the lightest shard
		out[l.shard] = append(out[l.shard], f)
		l.bytes += sizes[f]
		l.files++
		heap.Fix(&h, 0)
	}
	for _, fs := range out {
		sort.Ints(fs)
	}
	return out, nil
}

// load is one shard's share so far.
type load struct {
	shard int
	bytes uint64
	files int
}

// loads is a min-heap of shards by bytes, then files, then index. Files
// second: among shards of equal bytes (empty ones, or after empty files)
// the one with fewer files comes first, so each shard gets a file before
// any gets a second.
type loads []*load

func (h loads) Len() int { return len(h) }
func (h loads) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.bytes != b.bytes {
		return a.bytes < b.bytes
	}
	if a.files != b.files {
		return a.files < b.files
	}
	return a.shard < b.shard
}
func (h loads) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *loads) Push(x any)   { *h = append(*h, x.(*load)) }
func (h *loads) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
