// Package tunnel holds what every daemon-side port forward shares: a TCP
// connection joined to a libp2p stream with bounded bytes and idle time,
// and a per-peer limit on how often a peer is answered a refusal. The
// service forward (node/providing/forward.go) and the gang network
// (node/gangnet) both carry raw TCP over streams whose far end is another
// party's to drive, so both need the same bounds.
package tunnel

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// BufSize is each direction's copy buffer unless Limits.Buf says
// otherwise: a joined connection costs two of them.
const BufSize = 32 << 10

// ErrTooLarge cuts a direction that passed its byte limit.
var ErrTooLarge = errors.New("tunnel: byte limit reached")

// Limits bound one joined connection.
type Limits struct {
	Idle    time.Duration // a direction with no bytes for this long ends the connection
	MaxUp   int64         // bytes from the stream to the TCP side
	MaxDown int64         // bytes from the TCP side to the stream
	// Buf is each direction's copy buffer; 0 is BufSize. Larger buffers
	// mean fewer reads, writes and deadline updates per byte: a bulk
	// transfer through a forward is bound by those (see the gang
	// network's numbers in docs/PERFORMANCE.md).
	Buf int
}

// deadlineRW is what both ends of a joined connection are.
type deadlineRW interface {
	Read([]byte) (int, error)
	Write([]byte) (int, error)
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// Join copies both ways between s and c until both directions ended. A
// direction that ends cleanly half-closes the other side (an HTTP
// client's request is done, a server closed after its response); one that
// fails, idles out or passes its limit resets the stream and closes c.
// The first error is returned; s is closed or reset either way.
func Join(s network.Stream, c *net.TCPConn, lim Limits) error {
	errc := make(chan error, 2)
	go func() {
		err := copyBounded(c, s, lim.MaxUp, lim.Idle, lim.Buf)
		if err == nil {
			err = c.CloseWrite()
		}
		errc <- err
	}()
	go func() {
		err := copyBounded(s, c, lim.MaxDown, lim.Idle, lim.Buf)
		if err == nil {
			err = s.CloseWrite()
		}
		errc <- err
	}()
	var first error
	for range 2 {
		if err := <-errc; err != nil && first == nil {
			first = err
			_ = s.Reset() // unblocks the other direction
			_ = c.Close()
		}
	}
	if first == nil {
		_ = s.Close()
	}
	return first
}

// copyBounded copies src to dst until src's EOF (nil), at most limit
// bytes, with every read and write due within idle, through a buffer of
// bufSize bytes (0: BufSize).
func copyBounded(dst, src deadlineRW, limit int64, idle time.Duration, bufSize int) error {
	if bufSize <= 0 {
		bufSize = BufSize
	}
	buf := make([]byte, bufSize)
	var total int64
	for {
		_ = src.SetReadDeadline(time.Now().Add(idle))
		n, err := src.Read(buf)
		if n > 0 {
			if total += int64(n); total > limit {
				return ErrTooLarge
			}
			_ = dst.SetWriteDeadline(time.Now().Add(idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
