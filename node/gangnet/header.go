package gangnet

import (
	"fmt"
	"io"

	"github.com/gleaner-net/gleaner/p2p"
)

// The gang stream: one header frame (which gang, from which rank to
// which), one reply frame (empty, or a refusal), then raw bytes both ways
// between the sender's container and the receiver's gang port: one TCP
// connection per stream.

// Proto is the gang stream's protocol, scoped by p2p to /gleaner/N/.
const Proto = "gang/1"

// The codes of a refused gang stream (Reply.Code).
const (
	CodeRefused     = "refused"     // not a member of that gang here, or the rosters disagree
	CodeBusy        = "busy"        // too many streams open for this peer
	CodeUnreachable = "unreachable" // the container's gang port does not answer
	CodeMalformed   = "malformed"   // the header frame is not one
)

// Frame limits of the opening.
const (
	MaxHeader = 512  // a gang ID, two ranks, a lease CID
	MaxReply  = 1024 // a code and one line of why
)

// Header opens a stream. Lease is the sender's, as the roster names it:
// the receiver checks it against its own copy, so two providers given
// different rosters for one gang do not connect.
type Header struct {
	Gang  string `json:"gang"`
	From  int    `json:"from"`
	To    int    `json:"to"`
	Lease string `json:"lease"`
}

// Reply answers it: no Code means the raw bytes follow.
type Reply struct {
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

// DecodeHeader is strict: one JSON object, no unknown fields, IDs that
// match their patterns and ranks a gang could have.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) > MaxHeader {
		return h, fmt.Errorf("gang header of %d bytes > %d", len(b), MaxHeader)
	}
	if err := p2p.DecodeJSON(b, &h); err != nil {
		return Header{}, err
	}
	switch {
	case !GangPattern.MatchString(h.Gang):
		return Header{}, fmt.Errorf("gang header: gang ID %q must match %s", h.Gang, GangPattern)
	case h.From < 0 || h.From >= MaxSize || h.To < 0 || h.To >= MaxSize || h.From == h.To:
		return Header{}, fmt.Errorf("gang header: ranks %d -> %d: want two distinct ranks in 0..%d", h.From, h.To, MaxSize-1)
	case !LeasePattern.MatchString(h.Lease):
		return Header{}, fmt.Errorf("gang header: lease %q must match %s", h.Lease, LeasePattern)
	}
	return h, nil
}

// RefusedError is a provider's refusal of a gang stream.
type RefusedError struct {
	Code    string // CodeRefused, CodeBusy, CodeUnreachable, CodeMalformed
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("gang stream refused (%s): %s", e.Code, e.Message)
}

// open is the sender's half of the opening: it writes h and reads the
// reply. nil: the raw bytes follow; a *RefusedError: the receiver
// refused; any other error: the stream failed. The caller bounds it with
// the stream's deadlines.
func open(s io.ReadWriter, h Header) error {
	if err := p2p.WriteJSON(s, h, MaxHeader); err != nil {
		return err
	}
	var rep Reply
	if err := p2p.ReadJSON(s, MaxReply, &rep); err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	if rep.Code != "" {
		return &RefusedError{Code: rep.Code, Message: rep.Error}
	}
	return nil
}
