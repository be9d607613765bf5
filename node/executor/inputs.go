package executor

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
)

// Read-only inputs.
//
// An input is a file tree the job reads (a data set, model weights), which
// the provider has in its block store. The executor asks for it as a tar
// stream (Input.Tar) once, before the job starts, and checks every entry
// of the stream on its way (checkInputTar): only regular files and
// directories with relative, clean names, no more bytes than declared, so
// that a buggy or hostile Tar can write nothing outside the input.
//
// Docker: each input is a `local` volume on the daemon's disk, not a tmpfs
// like the quota volumes (volume.go): an input can be GiBs, which must not
// count against the job's memory, and the job cannot write to it, so it
// needs no quota of its own; its size is bounded by the check instead. The
// volume is filled through a filler: a container of the holder image that
// mounts the job's input volumes read-write and is never started (the
// daemon mounts a created container's volumes for a copy, as for the
// checkpoint restore), and is removed once they are full, before the job's
// container exists. The job's container mounts them read-only at their
// Targets. An input volume's contents live on disk, so unlike a tmpfs it
// needs no holder to keep them; it carries the job's labels, so that
// Remove, Adopt (which finds a job's volumes by label and neither fills
// nor deletes them) and Reconcile treat it as the job's.
//
// Process: see processInputs.

// Input is a read-only file tree the job sees at Target, filled before the
// job starts.
type Input struct {
	Target string // absolute, clean path in the container, e.g. /data
	// Tar writes the tree as a tar stream (regular files and directories
	// only, names relative and clean) to w. It is called once, before the
	// job starts, with a context that ends when the executor stops reading,
	// and must return once it ends (the executor waits for it); it may
	// take long (it reads from the provider's block store). Its error, if
	// any, is what the failed Create or Start wraps.
	Tar func(ctx context.Context, w io.Writer) error
	// Bytes is the tree's size as declared: the most its regular files may
	// hold together (the volume's bound) and what errors quote; > 0.
	Bytes int64
}

// String keeps fmt from printing a func's address.
func (in Input) String() string { return fmt.Sprintf("input %s (%d bytes)", in.Target, in.Bytes) }

const (
	// MaxInputs bounds Spec.Inputs.
	MaxInputs = 16
	// EnvInputPrefix + N is the environment variable that tells the job
	// where input N is: its Target under Docker, the directory it was
	// unpacked into under the process executor.
	EnvInputPrefix = "GLEANER_INPUT_"
	// MaxInputEntries bounds the entries of one input's tar: each is an
	// inode on the provider's disk, which Bytes does not count.
	MaxInputEntries = 1 << 20
	// maxTrailing is how much a Tar may write after the end of its archive
	// (tar(1) pads archives to records of 10 KiB); it is read and dropped.
	maxTrailing = 1 << 20

	roleFiller = "filler"
)

// ErrBadInputTar wraps every refusal of an input's tar stream: an entry
// that is not a file or directory, a name that is absolute or not clean,
// more bytes than declared, a stream that is not a tar.
var ErrBadInputTar = errors.New("executor: input tar refused")

// errInputAbandoned: the input's reader stopped reading before the end.
var errInputAbandoned = errors.New("executor: input stream abandoned before its end")

// errStreamClosed is what a Tar's writes return once the executor stopped
// reading.
var errStreamClosed = errors.New("executor: input stream closed")

// reservedTargets are where an input may not go, nor above nor below:
// the executor's own mounts, and what the kernel and runtime provide.
var reservedTargets = []string{"/tmp", "/dev", "/dev/shm", "/proc", "/sys", "/etc"}

// validateInputs is Spec.validate's part for Inputs.
func (s *Spec) validateInputs(bad func(string, ...any) error) error {
	if len(s.Inputs) > MaxInputs {
		return bad("%d inputs, at most %d", len(s.Inputs), MaxInputs)
	}
	reserved := reservedTargets
	if s.CheckpointPath != "" {
		reserved = append(reserved[:len(reserved):len(reserved)], path.Clean(s.CheckpointPath))
	}
	for i, in := range s.Inputs {
		t := in.Target
		switch {
		case !path.IsAbs(t) || path.Clean(t) != t:
			return bad("input %d (%q): target must be an absolute, clean path", i, t)
		case t == "/":
			return bad("input %d (%q): target must not be /", i, t)
		case in.Tar == nil:
			return bad("input %d (%q): no Tar", i, t)
		case in.Bytes <= 0:
			return bad("input %d (%q): declared size %d, must be > 0", i, t, in.Bytes)
		}
		for _, r := range reserved {
			if overlaps(t, r) {
				what := "reserved path"
				if s.CheckpointPath != "" && r == path.Clean(s.CheckpointPath) {
					what = "checkpoint path"
				}
				return bad("input %d (%q): target overlaps the %s %s", i, t, what, r)
			}
		}
		for k, other := range s.Inputs[:i] {
			if overlaps(t, other.Target) {
				return bad("input %d (%q): target overlaps input %d (%q)", i, t, k, other.Target)
			}
		}
	}
	return nil
}

// overlaps reports that one of two clean absolute paths is the other or
// lies under it.
func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/") || strings.HasPrefix(b, strings.TrimSuffix(a, "/")+"/")
}

// inputEnv is what the job is told of where its inputs are.
func inputEnv(dirs []string) []string {
	env := make([]string, len(dirs))
	for i, d := range dirs {
		env[i] = EnvInputPrefix + strconv.Itoa(i) + "=" + d
	}
	return env
}

func (s *Spec) inputTargets() []string {
	ts := make([]string, len(s.Inputs))
	for i, in := range s.Inputs {
		ts[i] = in.Target
	}
	return ts
}

// inputVolume names input i's Docker volume: the job ID is followed by
// "-N", so that no two jobs' names meet.
func inputVolume(jobID string, i int) string { return "gleaner-in-" + jobID + "-" + strconv.Itoa(i) }

// fillerDir is where the filler mounts input i.
func fillerDir(i int) string { return "/in/" + strconv.Itoa(i) }

// readInput runs in.Tar, checks its stream with checkInputTar and hands
// the checked stream to consume. It returns once Tar, the check and
// consume are all done, with the error that explains a failure best: the
// check's refusal, else Tar's own error, else consume's.
func readInput(ctx context.Context, in Input, consume func(io.Reader) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rawR, rawW := io.Pipe()
	outR, outW := io.Pipe()
	tarDone := make(chan error, 1)
	go func() {
		err := callTar(ctx, in, rawW)
		rawW.CloseWithError(err)
		tarDone <- err
	}()
	checkDone := make(chan error, 1)
	go func() {
		err := checkInputTar(rawR, outW, in.Bytes)
		rawR.CloseWithError(errStreamClosed) // Tar's writes fail from now on
		outW.CloseWithError(err)             // nil: consume reads EOF
		checkDone <- err
	}()
	consumeErr := consume(struct{ io.Reader }{outR}) // only Read: nobody closes the pipe but us
	outR.CloseWithError(errStreamClosed)
	cancel()
	checkErr, tarErr := <-checkDone, <-tarDone
	var sink *sinkError
	var streamErr error
	switch {
	case errors.Is(checkErr, ErrBadInputTar):
		streamErr = checkErr
	case errors.As(checkErr, &sink):
		// consume stopped first; what Tar said after is its consequence.
		streamErr = errInputAbandoned
	case tarErr != nil && !errors.Is(tarErr, errStreamClosed):
		streamErr = fmt.Errorf("tar: %w", tarErr)
	default:
		streamErr = checkErr
	}
	if streamErr == nil || (streamErr == errInputAbandoned && consumeErr != nil) {
		return consumeErr
	}
	return streamErr
}

// callTar turns a panic of a buggy Tar into its error.
func callTar(ctx context.Context, in Input, w io.Writer) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("Tar panicked: %v", p)
		}
	}()
	return in.Tar(ctx, w)
}

// sinkError is a failed write of the checked stream: its reader stopped.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return "write checked input: " + e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// sourceReader remembers the first error reading the Tar's stream other
// than its end: Tar's own, which the check must not report as the
// stream's fault.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// or is the source's error if reading failed, else err.
func (s *sourceReader) or(err error) error {
	if s.err != nil {
		return s.err
	}
	return err
}

func badTar(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadInputTar}, a...)...)
}

// checkInputTar copies the tar stream r to w, entry by entry, and refuses
// (ErrBadInputTar) what could write anywhere but inside the tree, or more
// than limit bytes: an entry that is not a regular file or directory
// (symlinks, hard links, devices, fifos), a name that is absolute, not
// clean or with "..", regular files of more than limit bytes together,
// more than MaxInputEntries entries. What it writes is a new tar of fresh
// headers: the name, the type, the size, the modification time, modes
// 0644 (0755 for executables) and 0755 for directories, owner root; no
// extended attributes, owners or PAX records of the input go through. A
// "." directory entry (the tree's root) is dropped. The stream ends only
// once r has: what a Tar writes after its archive is read (up to
// maxTrailing bytes) so that its error, if it reports one at the end, is
// seen before w gets the archive's end.
func checkInputTar(r io.Reader, w io.Writer, limit int64) error {
	src := &sourceReader{r: r}
	tr := tar.NewReader(src)
	tw := tar.NewWriter(w)
	var total int64
	buf := make([]byte, 32<<10)
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return src.or(badTar("not a tar stream: %v", err))
		}
		if n >= MaxInputEntries {
			return badTar("more than %d entries", MaxInputEntries)
		}
		name, err := inputEntryName(h)
		if err != nil {
			return err
		}
		if name == "" { // the root
			continue
		}
		out := &tar.Header{Name: name, Typeflag: h.Typeflag, ModTime: entryTime(h.ModTime)}
		switch h.Typeflag {
		case tar.TypeDir:
			out.Name += "/"
			out.Mode = 0o755
		case tar.TypeReg:
			if h.Size < 0 || h.Size > limit-total {
				return badTar("entry %q: the tree is over its declared %d bytes", h.Name, limit)
			}
			total += h.Size
			out.Size, out.Mode = h.Size, 0o644
			if h.Mode&0o111 != 0 {
				out.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(out); err != nil {
			return &sinkError{err}
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		for {
			k, rerr := tr.Read(buf)
			if k > 0 {
				if _, err := tw.Write(buf[:k]); err != nil {
					return &sinkError{err}
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return src.or(badTar("entry %q: %v", h.Name, rerr))
			}
		}
	}
	k, err := io.Copy(io.Discard, io.LimitReader(src, maxTrailing+1))
	if err != nil {
		return src.or(err)
	}
	if k > maxTrailing {
		return badTar("more than %d bytes after the end of the archive", maxTrailing)
	}
	if err := tw.Close(); err != nil {
		return &sinkError{err}
	}
	return nil
}

// inputEntryName is h's name as checkInputTar writes it, without a
// leading "./" or a directory's trailing "/"; "" for the tree's root.
func inputEntryName(h *tar.Header) (string, error) {
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeDir:
	case tar.TypeSymlink:
		return "", badTar("entry %q is a symlink: only regular files and directories", h.Name)
	case tar.TypeLink:
		return "", badTar("entry %q is a hard link: only regular files and directories", h.Name)
	case tar.TypeChar, tar.TypeBlock:
		return "", badTar("entry %q is a device: only regular files and directories", h.Name)
	case tar.TypeFifo:
		return "", badTar("entry %q is a fifo: only regular files and directories", h.Name)
	default:
		return "", badTar("entry %q has type %q: only regular files and directories", h.Name, h.Typeflag)
	}
	name := h.Name
	if strings.HasPrefix(name, "/") {
		return "", badTar("entry %q is absolute", h.Name)
	}
	name = strings.TrimPrefix(name, "./")
	if h.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	if name == "" || name == "." {
		if h.Typeflag == tar.TypeDir {
			return "", nil
		}
		return "", badTar("entry %q: a file with no name", h.Name)
	}
	if strings.ContainsRune(name, 0) {
		return "", badTar("entry %q: NUL in its name", h.Name)
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == ".." {
			return "", badTar("entry %q escapes the tree (..)", h.Name)
		}
	}
	if path.Clean(name) != name {
		return "", badTar("entry %q: the name is not clean", h.Name)
	}
	return name, nil
}

// entryTime is t in whole seconds, or the epoch where a plain tar header
// cannot hold it.
func entryTime(t time.Time) time.Time {
	s := t.Unix()
	if s < 0 || s >= 1<<33 {
		return time.Unix(0, 0)
	}
	return time.Unix(s, 0)
}

// fillInputs creates the job's input volumes and fills each through a
// filler container, recording what exists in rs as it comes to exist, so
// that a failure halfway is cleaned up by removeResources. It returns
// once the filler is gone again.
func (d *Docker) fillInputs(ctx context.Context, s *Spec, rs *jobResources) error {
	hc := &container.HostConfig{
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		NetworkMode:    "none",
		LogConfig:      container.LogConfig{Type: "none"},
		Resources:      holderResources(),
	}
	for i, in := range s.Inputs {
		name := inputVolume(s.JobID, i)
		// Creating a volume that exists returns the old one, with whatever
		// it holds: an input gets a volume of its own or none.
		if _, err := d.cli.VolumeInspect(ctx, name); err == nil {
			return fmt.Errorf("input %d (%s): volume %s exists already", i, in.Target, name)
		} else if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("input %d (%s): inspect volume %s: %w", i, in.Target, name, err)
		}
		created, err := d.cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Driver: "local", Labels: s.labels(d.owner)})
		if err != nil {
			return fmt.Errorf("input %d (%s): create volume %s: %w", i, in.Target, name, err)
		}
		rs.volumes = append(rs.volumes, name)
		if created.Driver != "local" || len(created.Options) != 0 || created.Labels[LabelInstance] != d.owner.Instance {
			return fmt.Errorf("input %d (%s): volume %s is not the one created (%s %v)", i, in.Target, name, created.Driver, created.Options)
		}
		hc.Mounts = append(hc.Mounts, mount.Mount{
			Type: mount.TypeVolume, Source: name, Target: fillerDir(i),
			VolumeOptions: &mount.VolumeOptions{NoCopy: true},
		})
	}
	if err := d.ensureHolderImage(ctx); err != nil {
		return err
	}
	labels := s.labels(d.owner)
	labels[LabelRole] = roleFiller
	c, err := d.cli.ContainerCreate(ctx,
		&container.Config{Image: holderImage, User: "65534:65534", Labels: labels, NetworkDisabled: true},
		hc, nil, nil, "gleaner-fill-"+s.JobID)
	if err != nil {
		return fmt.Errorf("create input filler: %w", err)
	}
	rs.filler = c.ID
	for i, in := range s.Inputs {
		err := readInput(ctx, in, func(r io.Reader) error {
			return d.cli.CopyToContainer(ctx, c.ID, fillerDir(i), r, container.CopyToContainerOptions{})
		})
		if err != nil {
			return fmt.Errorf("input %d (%s, %d bytes): %w", i, in.Target, in.Bytes, err)
		}
	}
	if err := d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove input filler: %w", err)
	}
	rs.filler = ""
	return nil
}

// inputMounts are the job's read-only mounts of its inputs.
func (s *Spec) inputMounts() []mount.Mount {
	ms := make([]mount.Mount, len(s.Inputs))
	for i, in := range s.Inputs {
		ms[i] = mount.Mount{
			Type: mount.TypeVolume, Source: inputVolume(s.JobID, i), Target: in.Target, ReadOnly: true,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true},
		}
	}
	return ms
}
