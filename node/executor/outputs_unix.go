//go:build unix

package executor

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CopyOutputs implements Job: the outputs directory as a tar stream with
// the names Docker's copy gives ("./" for the directory itself, "./a/"
// for a directory, "./a/b" for a file). Only regular files and
// directories go in; a symlink or anything else the job made there is
// left out, and files are opened without following links, so that the
// stream holds nothing from outside the directory.
func (j *processJob) CopyOutputs(ctx context.Context) (io.ReadCloser, error) {
	if j.outs == "" {
		return nil, ErrNoOutputs
	}
	if _, err := os.Stat(j.outs); err != nil {
		return nil, fmt.Errorf("executor: copy outputs of job %s: %w", j.spec.JobID, err)
	}
	return tarTree(ctx, j.outs), nil
}

// tarTree streams root's regular files and directories as a tar; the
// stream fails if ctx ends or a file changes size while it is read.
func tarTree(ctx context.Context, root string) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if !(d.IsDir() || d.Type().IsRegular()) {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			hdr, err := tar.FileInfoHeader(info, "")
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			switch {
			case rel == ".":
				hdr.Name = "./"
			case d.IsDir():
				hdr.Name = "./" + filepath.ToSlash(rel) + "/"
			default:
				hdr.Name = "./" + filepath.ToSlash(rel)
			}
			hdr.Uname, hdr.Gname = "", ""
			if !d.Type().IsRegular() {
				return tw.WriteHeader(hdr)
			}
			f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if n, err := io.CopyN(tw, f, hdr.Size); err != nil {
				return fmt.Errorf("%s: %d of %d bytes: %w", hdr.Name, n, hdr.Size, err)
			}
			return nil
		})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}
