package node

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// maxJobFrame bounds every message of these protocols: a spec is at most
// 64 KiB, a log chunk 16 KiB; anything larger is hostile.
const maxJobFrame = 12 << 20 // a start request may carry an 8 MiB checkpoint

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

// jobEvent is what a provider streams back while a job runs.
type jobEvent struct {
	Type     string    `json:"type"` // "status", "log", "heartbeat", "telemetry", "checkpoint", "exit", "error"
	Status   string    `json:"status,omitempty"`
	Log      []byte    `json:"log,omitempty"`
	ExitCode int       `json:"exit_code,omitempty"`
	Error    string    `json:"error,omitempty"`
	PullMS   int64     `json:"pull_ms,omitempty"`       // on exit: how long the image pull took
	Output   string    `json:"output_sha256,omitempty"` // on exit: sha256 of the job's stdout
	Time     time.Time `json:"time"`
}

// writeMsg and readMsg frame JSON messages. Decoding is strict: unknown
// fields and trailing data are errors, and the frame size is checked by
// p2p.ReadFrame before anything is allocated.
func writeMsg(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return p2p.WriteFrame(w, b, maxJobFrame)
}

func readMsg(r io.Reader, v any) error {
	b, err := p2p.ReadFrame(r, maxJobFrame)
	if err != nil {
		return err
	}
	return decodeMsg(b, v)
}

func decodeMsg(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed message: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("malformed message: trailing data")
	}
	return nil
}
