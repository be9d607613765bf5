package doctor

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gleaner-net/gleaner/node/repo"
)

// Disk thresholds. Below diskWarnFraction of the filesystem free, or below
// what the block store may still grow by (its quota less what it holds),
// doctor warns; below
// diskFailBytes the node's own databases may fail to write, so it fails.
const (
	diskWarnFraction = 0.10
	diskFailBytes    = 512 << 20
)

// DiskChecks checks free space where the repo (node.db, ledger.db) and the
// block store (<repo>/data) live; one check when they share a filesystem.
func DiskChecks(dir string) []Check {
	quota := int64(repo.DefaultDataQuotaGiB) << 30
	if cfg, err := repo.LoadConfig(filepath.Join(dir, repo.ConfigFile)); err == nil {
		quota = int64(cfg.Data.QuotaGiB) << 30
	}
	paths := []string{dir}
	dataDir := filepath.Join(dir, repo.DataDir)
	held := dirBytes(dataDir)
	if st, err := os.Stat(dataDir); err == nil {
		rst, rerr := os.Stat(dir)
		d1, ok1 := fileDevice(st)
		d2, ok2 := fileDevice(rst)
		if rerr == nil && (!ok1 || !ok2 || d1 != d2) {
			paths = append(paths, dataDir)
		}
	}
	var out []Check
	for _, p := range paths {
		name := "disk"
		if len(paths) > 1 {
			name = "disk " + filepath.Base(p)
		}
		free, total, err := diskSpace(existingParent(p))
		if err != nil {
			out = append(out, Check{Name: name, Status: StatusWarn, Detail: "free space at " + p + ": " + err.Error(),
				Fix: "check the free space yourself (df -h " + p + ")"})
			continue
		}
		c := judgeDisk(p, free, total, quota, held)
		c.Name = name
		out = append(out, c)
	}
	return out
}

// existingParent is p or its nearest existing parent: a repo not yet
// created still has a filesystem it will be created on.
func existingParent(p string) string {
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		up := filepath.Dir(p)
		if up == p {
			return p
		}
		p = up
	}
}

// dirBytes is the bytes of the files under dir, 0 when there is none: the
// block store is leveldb's tables of up to 16 MiB each, so even a full
// store is a few thousand files, walked in milliseconds. (The daemon holds
// the store's lock, so doctor cannot open it to ask.)
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// judgeDisk is the verdict on free of total bytes at path, for a block
// store that holds held bytes and may grow to quota bytes: it needs
// quota - held more, never less than none.
func judgeDisk(path string, free, total uint64, quota, held int64) Check {
	pct := 0.0
	if total > 0 {
		pct = 100 * float64(free) / float64(total)
	}
	need := max(quota-held, 0)
	detail := fmt.Sprintf("%s free of %s (%.0f%%) at %s; data quota %s, %s of it in use", gib(free), gib(total), pct, path, gib(uint64(max(quota, 0))), gib(uint64(max(held, 0))))
	c := Check{Name: "disk", Status: StatusPass, Detail: detail}
	switch {
	case free < diskFailBytes:
		c.Status = StatusFail
		c.Fix = "free space on this filesystem: the node's databases need room to write"
	case pct < 100*diskWarnFraction:
		c.Status = StatusWarn
		c.Fix = fmt.Sprintf("free space; under %.0f%% free, job inputs and outputs may not fit", 100*diskWarnFraction)
	case need > 0 && free < uint64(need):
		c.Status = StatusWarn
		c.Fix = fmt.Sprintf("free space, or lower data.quota_gib in config.toml: the block store may grow %s more, to its quota", gib(uint64(need)))
	}
	return c
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
