package p2p

import (
	"errors"
	"fmt"
	"io"

	"github.com/libp2p/go-libp2p/core/network"
)

// Frame memory is accounted to libp2p's resource manager before it is
// allocated (issue 31): a frame read from a stream reserves its declared
// length on the stream's scope, which charges the stream, its peer, its
// protocol and the whole node, and the reservation is released once the
// frame has been handled. A frame the budget cannot cover is refused at its
// header, before a byte of its body is buffered, so the per-peer and
// per-node memory limits (resourceLimits) bound what every peer together
// can make the node hold in frames, not only how many streams they open.

// ErrFrameBudget is returned when a frame's declared length does not fit
// in the memory budget of its stream, its peer or the node.
var ErrFrameBudget = errors.New("p2p: frame refused: over the memory budget")

// largeFrame is the size from which a frame is reserved at a lower
// priority: above it, the reservation must leave a fifth of every scope's
// limit (the peer's, the node's) free, so that peers sending large frames
// can never crowd out the small ones every honest exchange needs (quotes,
// awards, heads). Below it, a frame may use the budget up to its end.
const largeFrame = 128 << 10

// scoped is a reader whose frames are accounted to a resource scope: a
// libp2p stream.
type scoped interface {
	Scope() network.StreamScope
}

// reserveFrame reserves n bytes for a frame read from r, if r is a
// libp2p stream, and returns what releases them. A reader that is not a
// stream (a buffer, a pipe in a test) has nothing to charge.
func reserveFrame(r io.Reader, n int) (release func(), err error) {
	s, ok := r.(scoped)
	if !ok || n == 0 {
		return func() {}, nil
	}
	scope := s.Scope()
	if scope == nil {
		return func() {}, nil
	}
	prio := network.ReservationPriorityAlways
	if n > largeFrame {
		prio = network.ReservationPriorityHigh
	}
	if err := scope.ReserveMemory(n, prio); err != nil {
		return nil, fmt.Errorf("%w: %d bytes: %v", ErrFrameBudget, n, err)
	}
	return func() { scope.ReleaseMemory(n) }, nil
}
