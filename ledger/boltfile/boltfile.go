// Package boltfile opens the node's bbolt databases (node.db, ledger.db) so
// that a damaged file is a one-line error naming it, never a crash, and
// checks it at open within a bounded time.
//
// bbolt trusts its file: a cut-short file makes it touch mapped memory past
// the end (SIGBUS), a page overwritten with garbage trips its assertions
// (panics), some of them in a goroutine of its own where nobody can recover
// them. So Open, before bbolt maps anything, reads the file itself: both
// meta pages (magic, version, checksum, as bbolt validates them), the size
// the chosen meta needs, the freelist page and every page of the tree, with
// each element's bounds, through plain reads that cannot fault. Only a file
// that passes is handed to bbolt, whose open and own consistency check
// (Tx.Check) then run with panics (and, for the caller's goroutine, memory
// faults) turned into errors.
//
// It lives under ledger because ledger may not import node; node uses it
// too. It imports nothing of the project.
package boltfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// DefaultCheckBudget is how long the integrity check at open may take
// before start goes on without finishing it (see Options.CheckBudget).
const DefaultCheckBudget = 10 * time.Second

// checkFactor bounds bbolt's Tx.Check by the structural walk's time: the
// check runs only when walk*checkFactor fits in what is left of the
// budget, so that the two together stay within it. BenchmarkOpenCheck
// measures the ratio: on 100k small entries (4402 pages) the walk takes
// 12-18 ms and Tx.Check 17-18 ms, so about 1.5 times the walk at most; 3
// leaves room for a cold page cache.
const checkFactor = 3

// Options says how to open a database.
type Options struct {
	// Buckets are created when missing (on a fresh file and on every open).
	Buckets [][]byte
	// Timeout is how long to wait for another process's lock on the file;
	// 0 waits forever (bbolt's default).
	Timeout time.Duration
	// CheckBudget bounds the integrity check at open; 0 is
	// DefaultCheckBudget. When the budget runs out the check stops, a log
	// line says how much was checked, and the database opens anyway.
	CheckBudget time.Duration
	// Advice is added to the damaged message, after the generic one (for
	// ledger.db: what moving it aside costs).
	Advice string
	// Logger gets the warnings (one meta page invalid, check cut short);
	// nil is slog.Default().
	Logger *slog.Logger
}

// ErrDamaged is matched (errors.Is) by every *DamagedError.
var ErrDamaged = errors.New("the database is damaged")

// DamagedError says that the file at Path cannot be used as it is.
type DamagedError struct {
	Path   string
	Reason string // what was found, in bbolt's words where bbolt found it; one line
	Advice string // extra advice, may be empty
}

func (e *DamagedError) Error() string {
	s := fmt.Sprintf("%s: the database is damaged (%s); restore it from a backup or move it aside to start with an empty one", e.Path, e.Reason)
	if e.Advice != "" {
		s += "; " + e.Advice
	}
	return s
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// Open opens the bbolt database at path, creating it when there is no file
// there. A fresh database is built under a temporary name and renamed into
// place, so that an existing file that is empty or shorter than its meta
// pages can only be damage, and is refused rather than silently recreated.
// Every problem with the file's contents is a *DamagedError; a lock held
// by another process is bbolt's ErrTimeout; other I/O errors are returned
// as they are.
func Open(path string, o Options) (*bolt.DB, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CheckBudget <= 0 {
		o.CheckBudget = DefaultCheckBudget
	}
	start := time.Now()
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := create(path, o); err != nil {
			return nil, err
		}
		info, err = os.Stat(path)
	}
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	damaged := func(format string, a ...any) error {
		return &DamagedError{Path: path, Reason: oneLine(fmt.Sprintf(format, a...)), Advice: o.Advice}
	}

	// Before bbolt maps the file: metas, size, freelist, tree, read under
	// a reader's lock (closing f releases it, just before bbolt takes its
	// own).
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := lockShared(f, o.Timeout); err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if info, err = f.Stat(); err != nil {
		f.Close()
		return nil, err
	}
	m, reason, warn := readMeta(f, info.Size())
	if reason != "" {
		f.Close()
		return nil, damaged("%s", reason)
	}
	if warn != "" {
		o.Logger.Warn(path+": "+warn, "file", path)
	}
	w := &walker{f: f, ps: uint64(m.pageSize), hwm: m.pgid, deadline: start.Add(o.CheckBudget),
		seen: make([]uint64, (m.pgid+63)/64)}
	walkErr := w.walk(m)
	f.Close()
	if walkErr != nil {
		return nil, damaged("%s", walkErr)
	}
	walked := time.Since(start)

	// bbolt's own open, then its own check, then (nothing written before
	// the file is known sound) the buckets.
	var file *os.File
	bo := &bolt.Options{Timeout: o.Timeout, OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
		ff, err := os.OpenFile(name, flag, perm)
		file = ff
		return ff, err
	}}
	var db *bolt.DB
	if p := guard(func() { db, err = bolt.Open(path, 0o600, bo) }); p != "" {
		if file != nil {
			file.Close() // releases bbolt's flock; the mapping stays until exit
		}
		return nil, damaged("bbolt failed opening it: %s", p)
	}
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) || errors.As(err, new(*fs.PathError)) {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		return nil, damaged("%v", err)
	}
	fail := func(err error) (*bolt.DB, error) {
		guard(func() { db.Close() })
		return nil, err
	}
	switch left := o.CheckBudget - time.Since(start); {
	case w.stopped:
		o.Logger.Warn(fmt.Sprintf("%s: integrity check stopped after %v with %d of %d pages read; the rest is unchecked and bbolt's own check was skipped", path, walked.Round(time.Millisecond), w.pages, m.pgid), "file", path)
	case walked*checkFactor > left:
		o.Logger.Warn(fmt.Sprintf("%s: every page was read and found sound in %v; bbolt's own check was skipped, it would not finish within the %v budget", path, walked.Round(time.Millisecond), o.CheckBudget), "file", path)
	default:
		if reason := check(db); reason != "" {
			return fail(damaged("%s", reason))
		}
	}
	missing := false
	_ = db.View(func(tx *bolt.Tx) error {
		for _, b := range o.Buckets {
			missing = missing || tx.Bucket(b) == nil
		}
		return nil
	})
	if missing { // else open writes nothing
		var uerr error
		if p := guard(func() { uerr = db.Update(createBuckets(o.Buckets)) }); p != "" {
			return fail(damaged("bbolt failed writing to it: %s", p))
		}
		if uerr != nil {
			return fail(fmt.Errorf("%s: %w", path, uerr))
		}
	}
	return db, nil
}

// create builds a fresh database with its buckets under a temporary name,
// then renames it to path: a crash leaves either no file or a whole one.
func create(path string, o Options) error {
	tmp := path + ".new"
	_ = os.Remove(tmp) // left by a crash during an earlier create
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: o.Timeout})
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := db.Update(createBuckets(o.Buckets)); err != nil {
		db.Close()
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // the rename itself durable
		d.Close()
	}
	return nil
}

func createBuckets(names [][]byte) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		for _, b := range names {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}
}

// check runs bbolt's Tx.Check and returns its first finding ("" if none).
// Check recovers its own panics (it runs in a goroutine of its own, out of
// reach of guard); the walk before it has bounded every page and element
// it reads, so it cannot fault.
func check(db *bolt.DB) string {
	var found []string
	p := guard(func() {
		_ = db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				found = append(found, err.Error())
			}
			return nil
		})
	})
	switch {
	case p != "":
		return "bbolt failed checking it: " + p
	case len(found) == 1:
		return "bbolt check: " + found[0]
	case len(found) > 1:
		return fmt.Sprintf("bbolt check: %s, and %d more problems", found[0], len(found)-1)
	}
	return ""
}

// guard runs fn with memory faults turned into panics and returns what a
// panic said ("" when fn returned).
func guard(fn func()) (panicked string) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(interface{ Addr() uintptr }); ok { // a memory fault (SetPanicOnFault)
				panicked = fmt.Sprintf("reading its memory-mapped pages faulted at %#x", f.Addr())
				return
			}
			panicked = fmt.Sprint(r)
		}
	}()
	fn()
	return ""
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// The on-disk format (bbolt's, version 2, in the machine's byte order).
const (
	magic          = 0xED0CDAED
	version        = 2
	pageHeaderSize = 16
	elementSize    = 16 // branch and leaf elements alike
	branchFlag     = 0x01
	leafFlag       = 0x02
	metaFlag       = 0x04
	freelistFlag   = 0x10
	bucketLeafFlag = 0x01
	noFreelist     = ^uint64(0)
	maxDepth       = 64
)

var order = binary.NativeEndian

type meta struct {
	pageSize                 uint32
	root, freelist, pgid, tx uint64
}

// parseMeta reads a meta page's body as bbolt's Meta.Validate does.
func parseMeta(b []byte) (meta, error) {
	if len(b) < 80 {
		return meta{}, berrors.ErrInvalid
	}
	b = b[pageHeaderSize:]
	if order.Uint32(b[0:]) != magic {
		return meta{}, berrors.ErrInvalid
	}
	if order.Uint32(b[4:]) != version {
		return meta{}, berrors.ErrVersionMismatch
	}
	h := fnv.New64a()
	h.Write(b[:56])
	if order.Uint64(b[56:]) != h.Sum64() {
		return meta{}, berrors.ErrChecksum
	}
	return meta{pageSize: order.Uint32(b[8:]), root: order.Uint64(b[16:]),
		freelist: order.Uint64(b[32:]), pgid: order.Uint64(b[40:]), tx: order.Uint64(b[48:])}, nil
}

// readMeta finds the page size as bbolt does (meta 0, else meta 1 at each
// possible page size), picks the meta bbolt would (the valid one with the
// higher transaction), and checks that the file holds every page it
// names. reason is why the file is unusable; warn, a problem bbolt
// survives (one meta page torn by a crash during a commit).
func readMeta(f *os.File, size int64) (m meta, reason, warn string) {
	if size == 0 {
		return m, "the file is empty", ""
	}
	read := func(off int64) []byte {
		b := make([]byte, 80)
		n, _ := f.ReadAt(b, off)
		return b[:n]
	}
	ps := uint32(0)
	m0, err0 := parseMeta(read(0))
	if err0 == nil {
		ps = m0.pageSize
	} else {
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			if m1, err := parseMeta(read(pos)); err == nil {
				ps = m1.pageSize
				break
			}
		}
	}
	if ps == 0 {
		return m, fmt.Sprintf("neither meta page is valid: %v", err0), ""
	}
	if ps < 1024 || ps > 1<<24 || ps&(ps-1) != 0 {
		return m, fmt.Sprintf("meta page gives page size %d", ps), ""
	}
	if size < 2*int64(ps) {
		return m, fmt.Sprintf("the file is %d bytes, shorter than its two %d-byte meta pages: it was cut short", size, ps), ""
	}
	if err0 == nil && m0.pageSize != ps {
		err0 = berrors.ErrInvalid
	}
	m1, err1 := parseMeta(read(int64(ps)))
	if err1 == nil && m1.pageSize != ps {
		err1 = berrors.ErrInvalid
	}
	switch {
	case err0 != nil && err1 != nil:
		return m, fmt.Sprintf("neither meta page is valid: %v, %v", err0, err1), ""
	case err1 != nil:
		m, warn = m0, fmt.Sprintf("meta page 1 is invalid (%v); bbolt uses meta page 0 (a commit cut short by a crash leaves this)", err1)
	case err0 != nil:
		m, warn = m1, fmt.Sprintf("meta page 0 is invalid (%v); bbolt uses meta page 1 (a commit cut short by a crash leaves this)", err0)
	case m1.tx > m0.tx:
		m = m1
	default:
		m = m0
	}
	switch {
	case m.pgid < 3 || m.pgid > uint64(1)<<48:
		return m, fmt.Sprintf("meta page gives %d pages", m.pgid), warn
	case m.root < 2 || m.root >= m.pgid:
		return m, fmt.Sprintf("root page %d out of range [2, %d)", m.root, m.pgid), warn
	case m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.pgid):
		return m, fmt.Sprintf("freelist page %d out of range [2, %d)", m.freelist, m.pgid), warn
	case m.pgid > uint64(size)/uint64(ps):
		return m, fmt.Sprintf("the file is %d bytes but its %d pages need %d: it was cut short", size, m.pgid, m.pgid*uint64(ps)), warn
	}
	return m, "", warn
}

// walker reads the tree through plain file reads, checking what bbolt
// would otherwise trust: each page's id and type, that it and its overflow
// lie below the high-water mark, that each element's key and value lie
// inside its page, that no page is reached twice. It stops (stopped) at
// the deadline.
type walker struct {
	f        *os.File
	ps, hwm  uint64
	deadline time.Time
	seen     []uint64 // bitset of the pages reached
	bufs     [][]byte // a page buffer per depth, reused
	pages    uint64   // pages read
	stopped  bool
}

var errStop = errors.New("stop")

func (w *walker) walk(m meta) error {
	w.mark(0, 0)
	w.mark(1, 0)
	if m.freelist != noFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return err
		}
	}
	err := w.tree(m.root, 0)
	if errors.Is(err, errStop) {
		w.stopped = true
		return nil
	}
	return err
}

// mark records pages id..id+overflow as reached; false if one already was.
func (w *walker) mark(id, overflow uint64) bool {
	ok := true
	for p := id; p <= id+overflow; p++ {
		if w.seen[p/64]&(1<<(p%64)) != 0 {
			ok = false
		}
		w.seen[p/64] |= 1 << (p % 64)
	}
	return ok
}

// page reads page id with its overflow into the buffer of depth and
// checks its header.
func (w *walker) page(id uint64, depth int) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page %d out of range [2, %d)", id, w.hwm)
	}
	w.pages++
	if w.pages%256 == 0 && !w.deadline.IsZero() && time.Now().After(w.deadline) { // zero: no deadline (benchmark)
		return nil, errStop
	}
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, make([]byte, w.ps))
	}
	b := w.bufs[depth][:w.ps]
	if _, err := w.f.ReadAt(b, int64(id*w.ps)); err != nil {
		return nil, fmt.Errorf("page %d: %v", id, err)
	}
	if got := order.Uint64(b); got != id {
		return nil, fmt.Errorf("page %d holds the header of page %d", id, got)
	}
	overflow := uint64(order.Uint32(b[12:]))
	if id+overflow >= w.hwm {
		return nil, fmt.Errorf("page %d with %d overflow pages runs past the last page %d", id, overflow, w.hwm-1)
	}
	if !w.mark(id, overflow) {
		return nil, fmt.Errorf("page %d is reached twice", id)
	}
	if overflow > 0 {
		if n := (overflow + 1) * w.ps; uint64(cap(b)) < n {
			w.bufs[depth] = make([]byte, n)
		}
		b = w.bufs[depth][:(overflow+1)*w.ps]
		if _, err := w.f.ReadAt(b, int64(id*w.ps)); err != nil {
			return nil, fmt.Errorf("page %d: %v", id, err)
		}
	}
	return b, nil
}

func (w *walker) freelist(id uint64) error {
	b, err := w.page(id, 0)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if flags := order.Uint16(b[8:]); flags != freelistFlag {
		return fmt.Errorf("freelist page %d has type %#x", id, flags)
	}
	n, at := uint64(order.Uint16(b[10:])), uint64(pageHeaderSize)
	if n == 0xFFFF { // the real count is in the first element
		n, at = order.Uint64(b[at:]), at+8
	}
	if n > (uint64(len(b))-at)/8 {
		return fmt.Errorf("freelist page %d claims %d free pages, more than it holds", id, n)
	}
	for i := uint64(0); i < n; i++ {
		if p := order.Uint64(b[at+8*i:]); p < 2 || p >= w.hwm {
			return fmt.Errorf("freelist page %d names page %d, out of range [2, %d)", id, p, w.hwm)
		}
	}
	return nil
}

func (w *walker) tree(id uint64, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("page %d: the tree is deeper than %d levels", id, maxDepth)
	}
	b, err := w.page(id, depth)
	if err != nil {
		return err
	}
	return w.elements(id, b, depth)
}

// elements checks the elements of page id (b: its bytes, or an inline
// bucket's) and walks into its children and sub-buckets.
func (w *walker) elements(id uint64, b []byte, depth int) error {
	if len(b) < pageHeaderSize {
		return fmt.Errorf("page %d: %d bytes, shorter than a page header", id, len(b))
	}
	flags, count := order.Uint16(b[8:]), uint64(order.Uint16(b[10:]))
	end := uint64(len(b))
	if pageHeaderSize+count*elementSize > end {
		return fmt.Errorf("page %d claims %d elements, more than it holds", id, count)
	}
	for i := uint64(0); i < count; i++ {
		at := pageHeaderSize + i*elementSize
		e := b[at : at+elementSize]
		switch flags {
		case branchFlag:
			pos, ksize, child := uint64(order.Uint32(e)), uint64(order.Uint32(e[4:])), order.Uint64(e[8:])
			if at+pos+ksize > end {
				return fmt.Errorf("page %d: branch element %d's key lies outside the page", id, i)
			}
			if err := w.tree(child, depth+1); err != nil {
				return err
			}
		case leafFlag:
			lf, pos, ksize, vsize := order.Uint32(e), uint64(order.Uint32(e[4:])), uint64(order.Uint32(e[8:])), uint64(order.Uint32(e[12:]))
			v := at + pos + ksize
			if v+vsize > end {
				return fmt.Errorf("page %d: leaf element %d's key or value lies outside the page", id, i)
			}
			if lf&bucketLeafFlag == 0 {
				continue
			}
			if vsize < 16 {
				return fmt.Errorf("page %d: leaf element %d is a bucket of %d bytes", id, i, vsize)
			}
			val := b[v : v+vsize]
			if root := order.Uint64(val); root != 0 {
				if err := w.tree(root, depth+1); err != nil {
					return err
				}
			} else if err := w.inline(id, i, val[16:], depth+1); err != nil {
				return err
			}
		default:
			return fmt.Errorf("page %d has type %#x, not a branch or leaf", id, flags)
		}
	}
	return nil
}

// inline checks a bucket kept inside its parent's leaf element: bbolt
// reads it as a leaf page that names no other page.
func (w *walker) inline(id, i uint64, b []byte, depth int) error {
	if len(b) >= pageHeaderSize && order.Uint16(b[8:]) != leafFlag {
		return fmt.Errorf("page %d: leaf element %d is an inline bucket of type %#x, not a leaf", id, i, order.Uint16(b[8:]))
	}
	return w.elements(id, b, depth)
}
