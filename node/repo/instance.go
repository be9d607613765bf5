package repo

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// InstanceFile holds the repo's instance ID (Instance).
const InstanceFile = "instance.json"

// instanceRecord is InstanceFile: the ID, and where the repo was when the
// ID was made, so that a copy of the repo can tell it is one.
type instanceRecord struct {
	ID  string `json:"id"`
	Dir string `json:"dir"`           // the repo directory's absolute path
	Dev uint64 `json:"dev,omitempty"` // its device and inode, where the OS has them
	Ino uint64 `json:"ino,omitempty"`
}

// Instance is this repo's instance ID: random, made the first time it is
// asked for and kept in InstanceFile. The node labels what it creates on a
// shared Docker engine with it, and removes as its own leftovers only what
// carries it, so that two copies of one repo (the same identity.key, hence
// the same peer ID) started on one engine never remove each other's jobs.
//
// A copy carries InstanceFile with it, so the file also records the repo
// directory it was made in, and a repo that finds itself in another
// directory makes a new ID. Another directory is one with another inode
// (cp -r, a restored backup, a copy bind-mounted at the same path into a
// second container); a repo that was moved within its filesystem, or whose
// filesystem's device number changed while its path did not, keeps its ID.
// Erring the other way costs only that the last run's leftovers stay on
// the engine (and are logged), never that a running job is removed.
//
// The daemon calls it while it holds the repo's lock.
func (r *Repo) Instance() (string, error) {
	here, err := r.instanceHere()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(r.path(InstanceFile))
	switch {
	case err == nil:
		var rec instanceRecord
		if json.Unmarshal(b, &rec) == nil && len(rec.ID) >= 16 && here.same(rec) {
			return rec.ID, nil
		}
		// Corrupt, or made in another directory: this repo is a copy.
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read instance ID: %w", err)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", fmt.Errorf("generate instance ID: %w", err)
	}
	here.ID = hex.EncodeToString(id)
	data, err := json.Marshal(here)
	if err != nil {
		return "", err
	}
	tmp := r.path(InstanceFile + ".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("write instance ID: %w", err)
	}
	if err := os.Rename(tmp, r.path(InstanceFile)); err != nil {
		return "", fmt.Errorf("write instance ID: %w", err)
	}
	return here.ID, nil
}

// instanceHere is the record of the repo directory as it is now, without
// an ID.
func (r *Repo) instanceHere() (instanceRecord, error) {
	abs, err := filepath.Abs(r.Dir)
	if err != nil {
		return instanceRecord{}, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return instanceRecord{}, fmt.Errorf("repo directory: %w", err)
	}
	rec := instanceRecord{Dir: abs}
	rec.Dev, rec.Ino, _ = fileID(st)
	return rec, nil
}

// same: rec was made in this directory. Where the OS has inodes, the
// inode must match, and the device or the path with it (device numbers of
// some filesystems change across mounts); elsewhere, the path.
func (h instanceRecord) same(rec instanceRecord) bool {
	if h.Ino == 0 || rec.Ino == 0 {
		return h.Ino == rec.Ino && h.Dir == rec.Dir
	}
	return h.Ino == rec.Ino && (h.Dev == rec.Dev || h.Dir == rec.Dir)
}
