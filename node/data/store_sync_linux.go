package data

import (
	"os"

	"golang.org/x/sys/unix"
)

// flatfsSyncsEachFile is false on Linux: the store syncs the whole
// filesystem once per write instead (putSettled), with syncfs(2).
const flatfsSyncsEachFile = false

// syncBlocks makes every block file written and renamed so far durable:
// syncfs(2) on the filesystem that holds the blocks' directory, one call
// for a whole batch of files, their renames and their directories.
func (s *Store) syncBlocks() error { return syncFilesystem(s.blocksDir) }

// syncFilesystem syncs the whole filesystem that holds f.
func syncFilesystem(f *os.File) error { return unix.Syncfs(int(f.Fd())) }
