package p2p

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxFrame is the frame limit for /gleaner/N/* streams unless a
// protocol sets its own.
const DefaultMaxFrame = 1 << 20

// ErrFrameTooLarge is returned when a frame's length exceeds the limit.
var ErrFrameTooLarge = errors.New("p2p: frame too large")

// errBadVarint covers overlong (non-minimal) and overflowing length prefixes;
// accepting them would give one message several encodings.
var errBadVarint = errors.New("p2p: malformed frame length")

// WriteFrame writes p as one frame: uvarint length, then payload.
func WriteFrame(w io.Writer, p []byte, max int) error {
	if len(p) > max {
		return fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, len(p), max)
	}
	var buf [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(buf[:], uint64(len(p)))
	// One write for small frames keeps header and body in one packet.
	if len(p) <= 4096 {
		msg := make([]byte, 0, n+len(p))
		_, err := w.Write(append(append(msg, buf[:n]...), p...))
		return err
	}
	if _, err := w.Write(buf[:n]); err != nil {
		return err
	}
	_, err := w.Write(p)
	return err
}

// frameStep is the most ReadFrame allocates ahead of the bytes that fill
// it: the first buffer of a frame, and the first step of its growth.
const frameStep = 64 << 10

// ReadFrame reads one frame. The length is checked against max, and
// accounted to the stream's memory budget (reserveFrame), before any
// buffer is allocated; the reservation lasts while the frame is read,
// which is as long as the peer decides. The buffer then grows with the
// bytes that actually arrive (it starts at min(n, frameStep) and doubles,
// so it is never more than twice what was received plus frameStep): a
// peer that declares a max-size frame and sends nothing costs frameStep,
// not max. Truncation anywhere yields io.ErrUnexpectedEOF; a clean end of
// stream before the first byte yields io.EOF.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	p, release, err := readFrame(r, max)
	if err != nil {
		return nil, err
	}
	release()
	return p, nil
}

// readFrame is ReadFrame with the frame's memory reservation still held:
// the caller releases it once done with the frame (ReadJSON: decoded).
func readFrame(r io.Reader, max int) ([]byte, func(), error) {
	n, err := readUvarint(r)
	if err != nil {
		return nil, nil, err
	}
	if max < 0 || n > uint64(max) {
		return nil, nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, max)
	}
	size := int(n) // fits: n <= max
	release, err := reserveFrame(r, size)
	if err != nil {
		return nil, nil, err
	}
	p, err := readBody(r, size)
	if err != nil {
		release()
		return nil, nil, err
	}
	return p, release, nil
}

// readBody reads size bytes into a buffer that grows with what arrives.
func readBody(r io.Reader, size int) ([]byte, error) {
	p := make([]byte, min(size, frameStep))
	for got := 0; ; {
		m, err := io.ReadFull(r, p[got:])
		got += m
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if got == size {
			return p, nil
		}
		// Doubling keeps the copying to about n bytes in all; the last
		// step is cut to size, so a whole frame carries no spare capacity.
		q := make([]byte, min(2*len(p), size))
		copy(q, p)
		p = q
	}
}

// readUvarint reads a minimal uvarint one byte at a time: the reader is a
// stream, and reading ahead would swallow the payload.
func readUvarint(r io.Reader) (uint64, error) {
	var x uint64
	var b [1]byte
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			if i > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		c := b[0]
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return 0, errBadVarint // overflows 64 bits
		}
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, errBadVarint // trailing zero group: not minimal
			}
			return x | uint64(c)<<(7*i), nil
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	return 0, errBadVarint
}
