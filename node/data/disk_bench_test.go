package data

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// writeBlockFiles writes what r yields as 256 KiB block files under dir in
// the store's write pattern (go-ds-flatfs's batch, as Store.PutMany uses
// it, and putSettled's one sync), with nothing else: per batch of
// putBatch blocks, each into a temporary file of the batch's own
// directory, written by up to 16 goroutines at once (each file synced
// too where flatfsSyncsEachFile); then each renamed into its shard
// directory (the next-to-last two characters of a base32 name, as
// flatfs's next-to-last/2: up to 1,024 directories); then the
// filesystem synced once (syncFilesystem), or, where flatfs syncs each
// file, each shard directory and the top one. A fresh buffer per block,
// as a fetch has one per received block. It is the disk's ceiling for
// what the store does, and the disk half of tcp-to-disk. The index's
// record of the batch (putSettled's two small leveldb writes) is the
// store's cost, not the disk's, so it is left out.
func writeBlockFiles(dir string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Join(dir, ".temp"), 0o755); err != nil {
		return err
	}
	top, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer top.Close()
	n := 0
	for batch := 0; ; batch++ {
		tmp := filepath.Join(dir, ".temp", strconv.Itoa(batch))
		if err := os.Mkdir(tmp, 0o755); err != nil {
			return err
		}
		var names []string
		var wg sync.WaitGroup
		gate := make(chan struct{}, 16)
		var mu sync.Mutex
		var werr error
		eof := false
		for len(names) < putBatch {
			buf := make([]byte, benchBlock)
			k, err := io.ReadFull(r, buf)
			if err == io.EOF {
				eof = true
				break
			}
			if err != nil && err != io.ErrUnexpectedEOF {
				return err
			}
			eof = err == io.ErrUnexpectedEOF
			var id [8]byte
			binary.BigEndian.PutUint64(id[:], uint64(n))
			sum := sha256.Sum256(id[:])
			name := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])
			n++
			names = append(names, name)
			gate <- struct{}{}
			wg.Add(1)
			go func(data []byte) {
				defer func() { <-gate; wg.Done() }()
				err := writeBlockFile(filepath.Join(tmp, name+".data"), data)
				if err != nil {
					mu.Lock()
					werr = err
					mu.Unlock()
				}
			}(buf[:k])
			if eof {
				break
			}
		}
		wg.Wait()
		if werr != nil {
			return werr
		}
		shards := map[string]bool{}
		for _, name := range names {
			shard := filepath.Join(dir, shardOf(name))
			if !shards[shard] {
				if err := os.Mkdir(shard, 0o755); err != nil && !os.IsExist(err) {
					return err
				}
				shards[shard] = true
			}
			if err := os.Rename(filepath.Join(tmp, name+".data"), filepath.Join(shard, name+".data")); err != nil {
				return err
			}
		}
		if flatfsSyncsEachFile {
			for shard := range shards {
				if err := syncPath(shard); err != nil {
					return err
				}
			}
			if err := top.Sync(); err != nil {
				return err
			}
		} else if err := syncFilesystem(top); err != nil {
			return err
		}
		if err := os.Remove(tmp); err != nil {
			return err
		}
		if eof {
			return nil
		}
	}
}

// writeBlockFile writes data to a new file at path, synced where flatfs
// syncs each file.
func writeBlockFile(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if flatfsSyncsEachFile {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// shardOf is the directory flatfs's next-to-last/2 puts a block file
// named name in: the name's next-to-last two characters.
func shardOf(name string) string { return name[len(name)-3 : len(name)-1] }
