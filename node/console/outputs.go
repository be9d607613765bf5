package console

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/gleaner-net/gleaner/node/rpc"
)

// A job's outputs, downloaded through the console. The node holds them
// as a DAG (the CID its provider's settlement names) and job_fetch
// writes them, checked block by block, into a new directory; the console
// has it written into a temporary directory on this machine, streams it
// to the browser as one tar file and removes it. The browser never holds
// the RPC token: the download is a page like the others, behind the
// session.

// Bounds on a download: at most maxDownloads at once (each is a copy on
// this machine's disk while it streams), each fetch within
// outputFetchTimeout, each archive at most maxOutputBytes (the largest
// outputs volume a spec may ask for, docs/DATA.md).
const (
	maxDownloads       = 2
	outputFetchTimeout = 10 * time.Minute
	maxOutputBytes     = 64 << 30
)

func (c *Console) outputs(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	var j jobRecord
	if err := c.opts.Caller.Call(r.Context(), "job_status", map[string]string{"id": id}, &j); err != nil {
		c.fail(w, r, se, "jobs", err)
		return
	}
	if j.Outputs == "" {
		c.render(w, r, http.StatusNotFound, "error", se, map[string]any{"Title": "No outputs", "Active": "jobs",
			"Error": "job " + j.ID + " has no outputs to download (its page says why)"})
		return
	}
	select {
	case c.downloads <- struct{}{}:
		defer func() { <-c.downloads }()
	default:
		c.render(w, r, http.StatusServiceUnavailable, "error", se, map[string]any{"Title": "Busy", "Active": "jobs",
			"Error": fmt.Sprintf("%d downloads are under way; try again when one ends", maxDownloads)})
		return
	}
	tmp, err := os.MkdirTemp("", "gleaner-console-outputs-")
	if err != nil {
		c.fail(w, r, se, "jobs", err)
		return
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "outputs")
	ctx, cancel := context.WithTimeout(r.Context(), outputFetchTimeout)
	defer cancel()
	var res struct {
		Bytes int64 `json:"bytes"`
	}
	err = c.opts.Caller.Call(ctx, "job_fetch", map[string]any{"id": j.ID, "dir": dir, "timeout_s": int(outputFetchTimeout.Seconds())}, &res)
	var re *rpc.Error
	if errors.As(err, &re) {
		c.render(w, r, http.StatusBadGateway, "error", se, map[string]any{"Title": "Cannot fetch the outputs", "Active": "jobs", "Error": re.Message})
		return
	}
	if err != nil {
		c.fail(w, r, se, "jobs", err)
		return
	}
	if res.Bytes > maxOutputBytes {
		c.render(w, r, http.StatusRequestEntityTooLarge, "error", se, map[string]any{"Title": "Outputs too large", "Active": "jobs",
			"Error": fmt.Sprintf("%d bytes: past the console's %d GiB; use gleaner job fetch %s", res.Bytes, maxOutputBytes>>30, j.ID)})
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", `attachment; filename="`+safeName(j.ID)+`-outputs.tar"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := writeTar(w, tmp, "outputs"); err != nil {
		// Headers are gone: the browser sees a cut download, the log why.
		c.opts.Log.Warn("console: streaming a job's outputs", "job", j.ID, "err", err)
	}
}

// writeTar writes root/name and everything under it to w as a tar
// archive, names relative to root. Only directories and regular files
// go in: job_fetch writes nothing else, and a link would be a way out of
// the directory.
func writeTar(w io.Writer, root, name string) error {
	tw := tar.NewWriter(w)
	var total int64
	err := filepath.WalkDir(filepath.Join(root, name), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = filepath.ToSlash(rel), "", "", 0, 0
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if total += info.Size(); total > maxOutputBytes {
			return fmt.Errorf("past %d bytes", int64(maxOutputBytes))
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, info.Size())
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// safeName keeps a job ID's letters, digits, '-' and '_' for a file
// name in a header (IDs are made of those; anything else is dropped).
func safeName(s string) string {
	b := make([]byte, 0, min(len(s), 64))
	for i := 0; i < len(s) && len(b) < 64; i++ {
		if c := s[i]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b = append(b, c)
		}
	}
	if len(b) == 0 {
		return "job"
	}
	return string(b)
}
