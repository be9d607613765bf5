//go:build !linux

package data

import "os"

// flatfsSyncsEachFile is true where there is no syncfs(2): flatfs syncs
// each block file before renaming it and the directories after, so a
// write is durable when it returns, as putSettled's sync makes it on
// Linux.
const flatfsSyncsEachFile = true

// syncBlocks has nothing left to sync: flatfs synced each file.
func (s *Store) syncBlocks() error { return nil }

// syncFilesystem is not available here; flatfs synced each file.
func syncFilesystem(*os.File) error { return nil }
