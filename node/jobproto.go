package node

import (
	"io"

	"github.com/gleaner-net/gleaner/node/wire"
)

// The rental's wire (protocols, messages, frame limits) is node/wire's,
// shared with the provider's side (node/providing); the renter's code
// uses it under these names.
const (
	quoteProto = wire.QuoteProto
	awardProto = wire.AwardProto
	jobProto   = wire.JobProto

	maxJobFrame      = wire.MaxJobFrame
	maxRequestFrame  = wire.MaxRequestFrame
	maxEventFrame    = wire.MaxEventFrame
	maxLogChunk      = wire.MaxLogChunk
	maxCheckpoint    = wire.MaxCheckpoint
	heartbeatEvery   = wire.HeartbeatEvery
	statusNotStarted = wire.StatusNotStarted
)

type (
	quoteRequest = wire.QuoteRequest
	quoteReply   = wire.QuoteReply
	awardRequest = wire.AwardRequest
	awardReply   = wire.AwardReply
	jobRequest   = wire.JobRequest
	wireEvent    = wire.Event
)

func writeMsg(w io.Writer, v any) error { return wire.Write(w, v) }

func readMsg(r io.Reader, limit int, v any) error { return wire.Read(r, limit, v) }

func decodeMsg(b []byte, v any) error { return wire.Decode(b, v) }

func leaseCID(raw []byte) string { return wire.LeaseCID(raw) }
