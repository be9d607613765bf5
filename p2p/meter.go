package p2p

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Libraries that read their own length-prefixed messages (gossipsub's RPCs,
// bitswap's messages) allocate a message's declared length as soon as they
// have read its prefix, and nothing charges that memory to the peer that
// declared it. A MeteredHost gives their handlers streams that watch the
// uvarint prefixes go by and reserve each message's length on the stream's
// scope as its prefix passes, before the library can see it, exactly as
// ReadFrame does for our own frames; a message the budget cannot cover
// fails the read at its prefix, and the library resets the stream.

// MeteredHost wraps h so that the stream handlers set through it read
// streams whose uvarint-delimited messages are accounted (meteredStream).
// Everything else is h's.
func MeteredHost(h host.Host) host.Host { return meteredHost{h} }

type meteredHost struct{ host.Host }

func (m meteredHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	m.Host.SetStreamHandler(pid, meterHandler(handler))
}

func (m meteredHost) SetStreamHandlerMatch(pid protocol.ID, match func(protocol.ID) bool, handler network.StreamHandler) {
	m.Host.SetStreamHandlerMatch(pid, match, meterHandler(handler))
}

func meterHandler(h network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) { h(newMeteredStream(s)) }
}

// meteredStream is an inbound stream whose reads are parsed as a sequence
// of uvarint-prefixed messages: at each prefix the message's length is
// reserved on the stream's scope, and released once its last byte has
// been read (or the stream ends).
type meteredStream struct {
	network.Stream
	mu    sync.Mutex // guards meter: a library may Close while it reads
	meter frameMeter
}

func newMeteredStream(s network.Stream) *meteredStream {
	ms := &meteredStream{Stream: s}
	ms.meter.reserve = func(n int) error {
		release, err := reserveFrame(s, n)
		if err != nil {
			return err
		}
		ms.meter.release = release
		return nil
	}
	return ms
}

func (s *meteredStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	s.mu.Lock()
	merr := s.meter.observe(p[:n])
	if merr != nil || err != nil {
		s.meter.done()
	}
	s.mu.Unlock()
	if merr != nil {
		_ = s.Stream.Reset()
		return 0, merr
	}
	return n, err
}

func (s *meteredStream) Close() error { s.release(); return s.Stream.Close() }
func (s *meteredStream) Reset() error { s.release(); return s.Stream.Reset() }

func (s *meteredStream) release() {
	s.mu.Lock()
	s.meter.done()
	s.mu.Unlock()
}

// frameMeter follows the message boundaries of a uvarint-delimited byte
// stream. It holds no bytes of its own: a prefix is at most ten bytes,
// folded into a number as they pass.
type frameMeter struct {
	reserve func(n int) error // reserves a message's length
	release func()            // releases the current message's reservation; nil if none

	prefix uint64 // the length read so far of a prefix in progress
	shift  uint   // bits of prefix read
	left   uint64 // body bytes of the current message still to come
}

// errMeterPrefix is a prefix longer than a uvarint can be.
var errMeterPrefix = errors.New("p2p: malformed message length prefix")

// observe accounts the bytes b that were just read.
func (m *frameMeter) observe(b []byte) error {
	for len(b) > 0 {
		if m.left > 0 {
			k := min(m.left, uint64(len(b)))
			m.left -= k
			b = b[k:]
			if m.left == 0 {
				m.done()
			}
			continue
		}
		c := b[0]
		b = b[1:]
		if m.shift >= 7*binary.MaxVarintLen64 {
			return errMeterPrefix
		}
		m.prefix |= uint64(c&0x7f) << m.shift
		m.shift += 7
		if c >= 0x80 {
			continue
		}
		n := m.prefix
		m.prefix, m.shift = 0, 0
		if n == 0 {
			continue
		}
		if n > uint64(maxMeteredMessage) {
			return fmt.Errorf("%w: %d bytes declared", ErrFrameBudget, n)
		}
		if err := m.reserve(int(n)); err != nil {
			return err
		}
		m.left = n
	}
	return nil
}

// done releases the current message's reservation, if any.
func (m *frameMeter) done() {
	if m.release != nil {
		m.release()
		m.release = nil
	}
}

// maxMeteredMessage bounds what one message may declare before its
// reservation is even tried: more than any library we meter reads in one
// message (bitswap's 4 MiB, gossipsub's 1 MiB).
const maxMeteredMessage = 16 << 20
