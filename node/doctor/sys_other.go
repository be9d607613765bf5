//go:build !(linux || darwin)

package doctor

import (
	"errors"
	"os"
)

func fileOwner(os.FileInfo) (int, bool)     { return 0, false }
func fileDevice(os.FileInfo) (uint64, bool) { return 0, false }

func diskSpace(string) (free, total uint64, err error) {
	return 0, 0, errors.New("free space is not known on this OS")
}
