//go:build linux || darwin

package executor

import "syscall"

// DiskFree is the bytes an unprivileged writer may still write on the
// filesystem that holds path (statfs's available blocks, not its free
// ones: the root-only reserve is no room for a job's data).
func DiskFree(path string) (int64, error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(path, &s); err != nil {
		return 0, err
	}
	return int64(s.Bavail) * int64(s.Bsize), nil // the types differ by OS
}
