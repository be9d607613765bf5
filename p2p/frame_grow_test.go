package p2p

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
)

// stallReader is a peer that declares a frame of declared bytes, sends the
// first sent of them and then fails (a stream reset or a deadline).
type stallReader struct {
	hdr  []byte
	sent int
	err  error
}

var errStalled = errors.New("stalled")

func newStallReader(declared, sent int) *stallReader {
	return &stallReader{hdr: binary.AppendUvarint(nil, uint64(declared)), sent: sent, err: errStalled}
}

func (r *stallReader) Read(p []byte) (int, error) {
	if len(r.hdr) > 0 {
		n := copy(p, r.hdr)
		r.hdr = r.hdr[n:]
		return n, nil
	}
	if r.sent == 0 {
		return 0, r.err
	}
	n := min(len(p), r.sent)
	clear(p[:n])
	r.sent -= n
	return n, nil
}

// allocated is the bytes f allocates, averaged over runs calls.
func allocated(runs int, f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// A peer that declares a 12 MiB frame (the job protocols' limit) and sends
// 100 bytes must cost the reader about frameStep, not 12 MiB: the buffer
// grows with what arrives.
func TestReadFrameDeclaredLargeSentSmallAllocatesLittle(t *testing.T) {
	const max = 12 << 20
	per := allocated(20, func() {
		if _, err := ReadFrame(newStallReader(max, 100), max); !errors.Is(err, errStalled) {
			t.Fatalf("want the reader's error, got %v", err)
		}
	})
	t.Logf("a declared 12 MiB frame cut off after 100 bytes allocated %d bytes", per)
	if per > frameStep+4096 {
		t.Fatalf("allocated %d bytes for 100 bytes received (limit %d)", per, frameStep+4096)
	}
}

// However much of a frame arrives before the peer stops, the buffer held
// is at most twice that plus frameStep, and the bytes allocated over the
// whole read at most four times that plus frameStep.
func TestReadFrameGrowsWithBytesReceived(t *testing.T) {
	const max = 12 << 20
	for _, sent := range []int{0, 1, frameStep - 1, frameStep, frameStep + 1, 1 << 20, 3<<20 + 7} {
		per := allocated(3, func() {
			if _, err := ReadFrame(newStallReader(max, sent), max); !errors.Is(err, errStalled) {
				t.Fatalf("sent %d: want the reader's error, got %v", sent, err)
			}
		})
		if limit := uint64(4*sent + frameStep + 4096); per > limit {
			t.Fatalf("sent %d of a declared %d: allocated %d bytes, limit %d", sent, max, per, limit)
		}
	}
}

// Frames whose sizes straddle the growth steps come back whole and exact,
// also when the reader hands out one byte or half a buffer at a time, as a
// stream does; a whole frame carries no spare capacity.
func TestReadFrameAcrossGrowthSteps(t *testing.T) {
	for _, n := range []int{frameStep - 1, frameStep, frameStep + 1, 2*frameStep + 3, 5*frameStep - 1, 1<<20 + 1} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 7)
		}
		var enc bytes.Buffer
		if err := WriteFrame(&enc, p, n); err != nil {
			t.Fatal(err)
		}
		enc.WriteString("tail")
		readers := map[string]func(io.Reader) io.Reader{
			"whole": func(r io.Reader) io.Reader { return r },
			"half":  iotest.HalfReader,
		}
		if n < 3*frameStep { // one byte at a time is slow
			readers["byte"] = iotest.OneByteReader
		}
		for name, wrap := range readers {
			r := bytes.NewReader(enc.Bytes())
			got, err := ReadFrame(wrap(r), n)
			if err != nil || !bytes.Equal(got, p) {
				t.Fatalf("n=%d %s: %d bytes back, err %v", n, name, len(got), err)
			}
			if cap(got) != n {
				t.Fatalf("n=%d %s: cap %d, want %d", n, name, cap(got), n)
			}
			if rest, _ := io.ReadAll(r); string(rest) != "tail" {
				t.Fatalf("n=%d %s: read past the frame, left %q", n, name, rest)
			}
		}
		// Cut short after each step: ErrUnexpectedEOF, never a short frame.
		for _, cut := range []int{1, frameStep, n - 1} {
			if cut >= n {
				continue
			}
			hdr := enc.Len() - 4 - n
			_, err := ReadFrame(bytes.NewReader(enc.Bytes()[:hdr+cut]), n)
			if err != io.ErrUnexpectedEOF {
				t.Fatalf("n=%d cut at %d: %v, want io.ErrUnexpectedEOF", n, cut, err)
			}
		}
	}
}

// readFramePrealloc is ReadFrame as it was before issue 11: one buffer of
// the declared length, allocated before any payload arrives. It is kept
// here only as the benchmark's reference.
func readFramePrealloc(r io.Reader, max int) ([]byte, error) {
	n, err := readUvarint(r)
	if err != nil {
		return nil, err
	}
	if max < 0 || n > uint64(max) {
		return nil, ErrFrameTooLarge
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return p, nil
}

// chunkReader hands out at most chunk bytes per Read, like a yamux stream
// handing out what one data frame carried.
type chunkReader struct {
	r     *bytes.Reader
	chunk int
}

func (c *chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.chunk)]) }

// BenchmarkReadFrame1MiB reads a real 1 MiB frame with the growing buffer
// (grow) and with the old buffer of the declared size (prealloc), from a
// reader that returns everything asked for (whole) and from one that
// returns 16 KiB per Read, as a stream does (16KiB).
func BenchmarkReadFrame1MiB(b *testing.B) {
	const n = 1 << 20
	var enc bytes.Buffer
	if err := WriteFrame(&enc, bytes.Repeat([]byte{0xab}, n), n); err != nil {
		b.Fatal(err)
	}
	for _, impl := range []struct {
		name string
		read func(io.Reader, int) ([]byte, error)
	}{{"grow", ReadFrame}, {"prealloc", readFramePrealloc}} {
		for _, rd := range []struct {
			name  string
			chunk int
		}{{"whole", n + 16}, {"16KiB", 16 << 10}} {
			b.Run(impl.name+"/"+rd.name, func(b *testing.B) {
				b.SetBytes(n)
				b.ReportAllocs()
				r := bytes.NewReader(enc.Bytes())
				cr := &chunkReader{r: r, chunk: rd.chunk}
				for b.Loop() {
					r.Reset(enc.Bytes())
					if p, err := impl.read(cr, n); err != nil || len(p) != n {
						b.Fatal(len(p), err)
					}
				}
			})
		}
	}
}
