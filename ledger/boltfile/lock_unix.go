//go:build unix

package boltfile

import (
	"os"
	"syscall"
	"time"

	berrors "go.etcd.io/bbolt/errors"
)

// lockShared takes a shared flock on f, as a bbolt reader would, so that
// no bbolt writer changes the file while it is read; it waits at most
// timeout (0: forever) for one to let go.
func lockShared(f *os.File, timeout time.Duration) error {
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err != syscall.EWOULDBLOCK {
			return err
		}
		if timeout != 0 && time.Since(start) > timeout {
			return berrors.ErrTimeout
		}
		time.Sleep(50 * time.Millisecond)
	}
}
