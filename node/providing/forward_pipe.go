package providing

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// errServiceTooLarge cuts a direction that passed its byte limit.
var errServiceTooLarge = errors.New("service stream: byte limit reached")

// deadlineRW is what both ends of a forwarded stream are.
type deadlineRW interface {
	Read([]byte) (int, error)
	Write([]byte) (int, error)
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// pipe copies both ways until both directions ended. A direction that ends
// cleanly half-closes the other side (an HTTP client's request is done, a
// server closed after its response); one that fails, idles out or passes
// its limit resets the whole stream.
func (f *Forwarder) pipe(s network.Stream, c *net.TCPConn) error {
	errc := make(chan error, 2)
	go func() {
		err := copyBounded(c, s, f.lim.MaxUp, f.lim.Idle)
		if err == nil {
			err = c.CloseWrite()
		}
		errc <- err
	}()
	go func() {
		err := copyBounded(s, c, f.lim.MaxDown, f.lim.Idle)
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
// bytes, with every read and write due within idle.
func copyBounded(dst, src deadlineRW, limit int64, idle time.Duration) error {
	buf := make([]byte, serviceBufSize)
	var total int64
	for {
		_ = src.SetReadDeadline(time.Now().Add(idle))
		n, err := src.Read(buf)
		if n > 0 {
			if total += int64(n); total > limit {
				return errServiceTooLarge
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
