//go:build !unix

package boltfile

import (
	"os"
	"time"
)

// lockShared is a no-op where bbolt's lock is not a flock: the walk reads
// the file unlocked there, and bbolt's own open takes its lock.
func lockShared(f *os.File, timeout time.Duration) error { return nil }
