package services

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The renter's side of /gleaner/N/service/1 (providing.Forwarder, wire/service.go): a
// connection to a service job's container through its provider, for an
// http.Transport's DialContext.

// serviceHandshake bounds the header's write and the reply's read when ctx
// has no earlier deadline: a provider that never answers costs this.
const serviceHandshake = 15 * time.Second

// Dial opens, from h, a connection to jobID's service on provider, which
// must be connected or dialable. ctx bounds the opening only; the
// connection lives until closed, with the provider's limits on its bytes
// and idle time.
func Dial(ctx context.Context, h *p2p.Host, provider peer.ID, jobID string) (net.Conn, error) {
	s, err := h.LibP2P().NewStream(ctx, provider, h.ProtocolID(wire.ServiceProto))
	if err != nil {
		return nil, fmt.Errorf("service stream to %s: %w", provider, err)
	}
	deadline := time.Now().Add(serviceHandshake)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = s.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := wire.OpenService(s, jobID); err != nil {
		_ = s.Reset()
		var se *wire.ServiceError
		if errors.As(err, &se) {
			return nil, se
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("service stream to %s: %w", provider, err)
	}
	if !stop() { // ctx ended meanwhile: the stream is reset
		return nil, ctx.Err()
	}
	_ = s.SetDeadline(time.Time{})
	return serviceConn{s, jobID}, nil
}

// serviceConn is the stream as a net.Conn.
type serviceConn struct {
	network.Stream
	job string
}

func (c serviceConn) LocalAddr() net.Addr {
	return serviceAddr{c.Conn().LocalPeer(), c.job}
}

func (c serviceConn) RemoteAddr() net.Addr {
	return serviceAddr{c.Conn().RemotePeer(), c.job}
}

// serviceAddr names one end of a service stream: a peer and the job.
type serviceAddr struct {
	peer peer.ID
	job  string
}

func (a serviceAddr) Network() string { return "gleaner-service" }
func (a serviceAddr) String() string  { return a.peer.String() + "/" + a.job }
