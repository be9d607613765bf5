//go:build !unix

package repo

import "os"

// fileID: this OS gives no inode; Instance compares paths only.
func fileID(os.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
