//go:build linux || darwin

package doctor

import (
	"os"
	"syscall"
)

// fileOwner is st's owner uid, where the OS says.
func fileOwner(st os.FileInfo) (int, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(s.Uid), true
}

// fileDevice is the device st lives on, to tell filesystems apart.
func fileDevice(st os.FileInfo) (uint64, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(s.Dev), true // the type differs by OS
}

// diskSpace is the space an unprivileged user may still write at path,
// and the filesystem's size, in bytes.
func diskSpace(path string) (free, total uint64, err error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return 0, 0, err
	}
	bs := uint64(s.Bsize) // the types differ by OS
	return s.Bavail * bs, s.Blocks * bs, nil
}
