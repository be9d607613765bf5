package executor

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// untar unpacks a checkpoint tar into dir for the process executor. Names
// must stay inside dir and only regular files and directories are made: a
// checkpoint comes from another machine and is hostile until unpacked.
func untar(data []byte, dir string) error {
	return untarFrom(bytes.NewReader(data), dir, "checkpoint")
}

// untarFrom unpacks the tar stream r into dir as untar does; what names
// the tar in errors ("checkpoint", "input").
func untarFrom(r io.Reader, dir, what string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if name == "." {
			continue
		}
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("%s entry %q escapes the %s directory", what, h.Name, what)
		}
		path := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s entry %q: only files and directories are restored", what, h.Name)
		}
	}
}

// openPermissions rewrites a checkpoint tar so that every entry is readable
// and writable by any user (files 0666, directories 0777), and refuses
// entries other than files and directories.
func openPermissions(data []byte) ([]byte, error) {
	var out bytes.Buffer
	tr := tar.NewReader(bytes.NewReader(data))
	tw := tar.NewWriter(&out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			h.Mode = 0o777
		case tar.TypeReg:
			h.Mode = 0o666
		default:
			return nil, fmt.Errorf("checkpoint entry %q: only files and directories are restored", h.Name)
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
