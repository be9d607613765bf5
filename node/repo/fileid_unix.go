//go:build unix

package repo

import (
	"os"
	"syscall"
)

// fileID is st's device and inode.
func fileID(st os.FileInfo) (dev, ino uint64, ok bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(s.Dev), uint64(s.Ino), true // the types differ by OS
}
