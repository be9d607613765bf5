package node

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gleaner-net/gleaner/node/repo"
)

// Disk thresholds. Below diskWarnFraction of the filesystem free, or below
// the data quota (the store may grow to it), doctor warns; below
// diskFailBytes the node's own databases may fail to write, so it fails.
const (
	diskWarnFraction = 0.10
	diskFailBytes    = 512 << 20
)

// DiskChecks checks free space where the repo (node.db, ledger.db) and the
// block store (<repo>/data) live; one check when they share a filesystem.
func DiskChecks(dir string) []Check {
	quota := int64(repo.DefaultDataQuotaGiB) << 30
	if cfg, err := repo.LoadConfig(filepath.Join(dir, ConfigFile)); err == nil {
		quota = int64(cfg.Data.QuotaGiB) << 30
	}
	paths := []string{dir}
	dataDir := filepath.Join(dir, DataDir)
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
		c := judgeDisk(p, free, total, quota)
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

// judgeDisk is the verdict on free of total bytes at path, for a block
// store that may grow to quota bytes.
func judgeDisk(path string, free, total uint64, quota int64) Check {
	pct := 0.0
	if total > 0 {
		pct = 100 * float64(free) / float64(total)
	}
	detail := fmt.Sprintf("%s free of %s (%.0f%%) at %s; data quota %s", gib(free), gib(total), pct, path, gib(uint64(quota)))
	c := Check{Name: "disk", Status: StatusPass, Detail: detail}
	switch {
	case free < diskFailBytes:
		c.Status = StatusFail
		c.Fix = "free space on this filesystem: the node's databases need room to write"
	case pct < 100*diskWarnFraction:
		c.Status = StatusWarn
		c.Fix = fmt.Sprintf("free space; under %.0f%% free, job inputs and outputs may not fit", 100*diskWarnFraction)
	case quota > 0 && free < uint64(quota):
		c.Status = StatusWarn
		c.Fix = "free space, or lower data.quota_gib in config.toml below the free space: the block store may grow to its quota"
	}
	return c
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
