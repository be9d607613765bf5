package node

import (
	"io"
	"time"

	"github.com/gleaner-net/gleaner/p2p"
)

// Stream protocols of a rental, scoped by p2p to /gleaner/N/.
const (
	quoteProto = "auction/1" // request for quotes -> signed bid or decline
	awardProto = "lease/1"   // renter-signed lease -> co-signed lease or refusal
	jobProto   = "job/1"     // start (then a stream of events) or cancel
)

// Frame limits, per message: anything larger is hostile, and a reader
// never accepts more than the message it expects can need, so a peer
// cannot make this node hold megabytes where kilobytes will do.
const (
	// maxJobFrame: a start request may carry an 8 MiB checkpoint.
	maxJobFrame = 12 << 20
	// maxRequestFrame: a quote request carries a spec of at most 64 KiB
	// (base64 in JSON); awards, replies and vouchers are smaller still.
	maxRequestFrame = 128 << 10
	// maxEventFrame: a job event carries at most a 128 KiB checkpoint
	// chunk (base64 in JSON) or a maxLogChunk of output.
	maxEventFrame = 256 << 10
	// maxLogChunk is the most output one log event carries.
	maxLogChunk = 16 << 10
)

type quoteRequest struct {
	JobID string `json:"job_id"`
	Nonce []byte `json:"nonce"`
	Spec  []byte `json:"spec"` // the job spec's YAML, without secrets
}

type quoteReply struct {
	Bid     []byte `json:"bid,omitempty"` // a SignedBid's wire bytes
	Decline string `json:"decline,omitempty"`
}

type awardRequest struct {
	Lease []byte `json:"lease"` // renter-signed SignedLease
}

type awardReply struct {
	Lease   []byte `json:"lease,omitempty"` // co-signed
	Refused string `json:"refused,omitempty"`
}

type jobRequest struct {
	Kind    string            `json:"kind"` // "start" or "cancel"
	Lease   []byte            `json:"lease"`
	Spec    []byte            `json:"spec,omitempty"`
	Secrets map[string]string `json:"secrets,omitempty"`
	// Checkpoint is the tar a preempted run shipped back, restored into
	// the spec's checkpoint path before the job starts.
	Checkpoint []byte `json:"checkpoint,omitempty"`
	// Nonce is echoed by every signed telemetry sample of this run, so
	// samples cannot be replayed from another run or forged in advance.
	Nonce []byte `json:"nonce,omitempty"`
}

// wireEvent is what a provider streams back on /job/1 while a job runs;
// the renter turns it into JobEvents for job_follow.
type wireEvent struct {
	Type     string    `json:"type"` // "status", "log", "heartbeat", "telemetry", "checkpoint", "exit", "error"
	Status   string    `json:"status,omitempty"`
	Log      []byte    `json:"log,omitempty"`
	ExitCode int       `json:"exit_code,omitempty"`
	Error    string    `json:"error,omitempty"`
	PullMS   int64     `json:"pull_ms,omitempty"`       // on exit: how long the image pull took
	Output   string    `json:"output_sha256,omitempty"` // on exit: sha256 of the job's stdout
	Time     time.Time `json:"time"`
}

// writeMsg and readMsg frame JSON messages (p2p.WriteJSON, p2p.ReadJSON).
// Decoding is strict: unknown fields and trailing data are errors, and the
// frame size is checked against the reader's limit by p2p.ReadFrame before
// anything is read.
func writeMsg(w io.Writer, v any) error { return p2p.WriteJSON(w, v, maxJobFrame) }

func readMsg(r io.Reader, limit int, v any) error { return p2p.ReadJSON(r, limit, v) }

func decodeMsg(b []byte, v any) error { return p2p.DecodeJSON(b, v) }
