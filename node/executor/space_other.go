//go:build !(linux || darwin)

package executor

import (
	"errors"
	"fmt"
)

// DiskFree is not known on this OS.
func DiskFree(path string) (int64, error) {
	return 0, fmt.Errorf("free space at %s: %w", path, errors.ErrUnsupported)
}
