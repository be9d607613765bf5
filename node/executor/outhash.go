package executor

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"sync"
)

// outputHash hashes a job's standard output as it streams past. It never
// fails a write, so the log buffer behind it sees every byte.
type outputHash struct {
	mu sync.Mutex
	h  hash.Hash
}

func newOutputHash() *outputHash { return &outputHash{h: sha256.New()} }

func (o *outputHash) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.h.Write(p)
	return len(p), nil
}

// Sum is the hex digest of what was written so far.
func (o *outputHash) Sum() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return hex.EncodeToString(o.h.Sum(nil))
}

// tee writes to the hash first (it cannot fail), then to w.
func (o *outputHash) tee(w io.Writer) io.Writer { return io.MultiWriter(o, w) }
