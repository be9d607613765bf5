// Package wire is the rental's messages over libp2p streams, shared by the
// renter's side (node) and the provider's (node/providing): the stream
// protocols, the message types, the frame limits and their framing.
package wire

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/p2p"
)

// Stream protocols of a rental, scoped by p2p to /gleaner/N/.
const (
	QuoteProto = "auction/1" // request for quotes -> signed bid or decline
	AwardProto = "lease/1"   // renter-signed lease -> co-signed lease or refusal
	// JobProto: a start (then a stream of events), an attach or a cancel.
	// Version 2 sends the request in two frames, a small head that
	// proves the lease before the large body is read (issue 31); version
	// 3 adds Event.Code, the typed reason a renter decides by.
	JobProto = "job/3"
	// JobProtoV2 is what providers that predate Event.Code serve: a
	// renter falls back to it and reads their words (LegacyCode). A
	// provider serves job/3 only: renters upgrade no later than providers
	// (a job/2 renter's strict decoder would take a code for a broken
	// stream), and strangers get one job protocol to hold streams on, not
	// two.
	JobProtoV2 = "job/2"
)

// Frame limits, per message: anything larger is hostile, and a reader
// never accepts more than the message it expects can need, so a peer
// cannot make this node hold megabytes where kilobytes will do.
const (
	// MaxJobFrame: a start's body may carry an 8 MiB checkpoint. It is
	// read only from the renter of an active lease (see JobHead).
	MaxJobFrame = 12 << 20
	// MaxJobHeadFrame: a job request's head, a lease (at most
	// auction.MaxLeaseBytes, 16 KiB, in base64) and a nonce. It is all a
	// peer can send before it has shown a lease.
	MaxJobHeadFrame = 32 << 10
	// MaxRequestFrame: a quote request carries a spec of at most 64 KiB
	// (base64 in JSON); awards, replies and vouchers are smaller still.
	MaxRequestFrame = 128 << 10
	// MaxEventFrame: a job event carries at most a 128 KiB checkpoint
	// chunk (base64 in JSON) or a MaxLogChunk of output.
	MaxEventFrame = 256 << 10
	// MaxLogChunk is the most output one log event carries.
	MaxLogChunk = 16 << 10
)

// HeartbeatEvery paces the provider's liveness events; the renter declares
// a provider lost after three missed beats.
const HeartbeatEvery = 5 * time.Second

// MaxCheckpoint bounds what a provider ships back (and a renter keeps).
const MaxCheckpoint = 8 << 20

// QuoteRequest is a renter's request for quotes on /auction/1.
type QuoteRequest struct {
	JobID string `json:"job_id"`
	Nonce []byte `json:"nonce"`
	Spec  []byte `json:"spec"` // the job spec's YAML, without secrets
	// Release, when set, is no request for quotes: the renter awarded
	// another provider (or gave the round up) and the provider drops the
	// hold its quote for JobID under Nonce placed (auction/provider's
	// quote holds), if the peer is that quote's renter. Nothing is
	// answered; the provider closes the stream. It rides on /auction/1
	// because that is safe with providers that predate it: their strict
	// decoder refuses the unknown field and resets the stream, doing
	// nothing, which is all a release asks of them; and an ordinary
	// request omits it, so they read those as before.
	Release bool `json:"release,omitempty"`
}

// QuoteReply is a provider's signed bid, or its decline.
type QuoteReply struct {
	Bid     []byte `json:"bid,omitempty"` // a SignedBid's wire bytes
	Decline string `json:"decline,omitempty"`
}

// AwardRequest is a renter's award on /lease/1.
type AwardRequest struct {
	Lease []byte `json:"lease"` // renter-signed SignedLease
}

// AwardReply is the co-signed lease, or the provider's refusal.
type AwardReply struct {
	Lease   []byte `json:"lease,omitempty"` // co-signed
	Refused string `json:"refused,omitempty"`
}

// JobRequest is what a renter sends first on /job/1.
type JobRequest struct {
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
	// RegistryAuth are the credentials for the spec's image, sent to the
	// winner only (never in a quote request), over the stream's
	// encryption; the renter keeps them in memory only.
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
	// Gang is a gang member's roster (node/gangnet.Roster, as JSON): every
	// member's provider and lease, known only once every member holds an
	// award, so sent with the start rather than inside the spec. The
	// provider decodes it with its own bounds (gangnet.DecodeRoster).
	Gang []byte `json:"gang,omitempty"`
}

// RegistryAuth are credentials for a private image registry. Printing one
// (fmt, slog) shows the user name only.
type RegistryAuth struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	IdentityToken string `json:"identity_token,omitempty"`
	Server        string `json:"server,omitempty"`
}

// MaxRegistryAuthField bounds each field: a token is a few KiB at most.
const MaxRegistryAuthField = 8 << 10

// Validate bounds the fields and wants a user with a password, or a token.
func (a *RegistryAuth) Validate() error {
	for _, f := range []string{a.Username, a.Password, a.IdentityToken, a.Server} {
		if len(f) > MaxRegistryAuthField {
			return fmt.Errorf("registry credentials: a field over %d bytes", MaxRegistryAuthField)
		}
	}
	if (a.Username == "") != (a.Password == "") && a.IdentityToken == "" {
		return errors.New("registry credentials: give username and password, or identity_token")
	}
	if a.Username == "" && a.Password == "" && a.IdentityToken == "" {
		return errors.New("registry credentials: empty")
	}
	return nil
}

// String shows who, never the secret.
func (a *RegistryAuth) String() string {
	if a == nil {
		return "none"
	}
	return fmt.Sprintf("registry credentials for user %q at %q (redacted)", a.Username, a.Server)
}

// GoString is String, so that %#v redacts too.
func (a *RegistryAuth) GoString() string { return a.String() }

// LogValue keeps slog from printing the fields.
func (a *RegistryAuth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// Event is what a provider streams back on /job/1 while a job runs;
// the renter turns it into JobEvents for job_follow.
type Event struct {
	Type     EventType `json:"type"`
	Status   Status    `json:"status,omitempty"`
	Log      []byte    `json:"log,omitempty"`
	ExitCode int       `json:"exit_code,omitempty"`
	Error    string    `json:"error,omitempty"`
	PullMS   int64     `json:"pull_ms,omitempty"`       // on exit: how long the image pull took
	Output   string    `json:"output_sha256,omitempty"` // on exit: sha256 of the job's stdout
	Time     time.Time `json:"time"`
	// Charged, on exit: what the provider's settlement charged of the
	// renter's best voucher (micro-credits, the billed running time to the
	// second); the rest is refunded. Nil from a provider that sent none.
	Charged *auction.Credits `json:"charged,omitempty"`
	// Offset, on a log event of the job's output, is where its first byte
	// lies in that output (counted from the run's first byte): a renter
	// that attaches again is sent the retained tail once more and keeps
	// only what it had not received. Nil on the provider's own notes.
	Offset *int64 `json:"offset,omitempty"`
	// LogRun names the provider's copy of the output that Offset counts
	// in: a provider that restarted and adopted the running job follows
	// its output from then on, its offsets from 0 again.
	//
	// Both came after /job/1 was first used, and decoding is strict
	// (Read): a renter built before them takes a provider's log event for
	// a broken stream, so renters must be upgraded no later than
	// providers.
	LogRun string `json:"log_run,omitempty"`
	// Outputs, on exit, is the CID of the job's results volume, as the
	// provider's settlement names it ("" for a spec without outputs, or
	// when they could not be imported; Error then says why).
	Outputs string `json:"outputs,omitempty"`
	// Code is the typed reason of an error event (job/3 on): what the
	// renter decides by. Empty from a provider that predates it: the
	// renter then maps the words (LegacyCode). On an exit, CodeOutputs
	// says the outputs were refused (Error says why).
	Code Code `json:"code,omitempty"`
}

// EventType is what an event on a job stream carries.
type EventType string

const (
	EventStatus     EventType = "status"     // the job's state changed (Status)
	EventLog        EventType = "log"        // output, or the provider's note
	EventHeartbeat  EventType = "heartbeat"  // every HeartbeatEvery: the provider lives
	EventTelemetry  EventType = "telemetry"  // a signed telemetry sample (Log)
	EventCheckpoint EventType = "checkpoint" // a piece of a preempted job's checkpoint (Log)
	EventExit       EventType = "exit"       // the run ended (Status says how)
	EventError      EventType = "error"      // a refusal or a start that failed (Code says which)
)

// Status is a status event's state of the job, or how an exit event's run
// ended.
type Status string

// The states a status event reports.
const (
	StatusFetching   Status = "fetching" // its inputs are fetched; not billed
	StatusPulling    Status = "pulling"
	StatusReserved   Status = "reserved" // gold: waiting for its window
	StatusRunning    Status = "running"
	StatusPaused     Status = "paused" // a voucher is late
	StatusPreempting Status = "preempting"
	StatusCancelled  Status = "cancelled" // the answer to a cancel
)

// How an exit event's run ended.
const (
	StatusCompleted Status = "completed" // the job exited by itself (ExitCode)
	StatusPreempted Status = "preempted" // with notice: a better tier, the owner, a stopping provider
	StatusUnpaid    Status = "unpaid"    // stopped for want of vouchers
	StatusStopped   Status = "stopped"   // cancelled by its renter, or stopped at its lease's end
)

// StatusNotStarted marks the error event of a job the provider could not
// start (its image could not be pulled, its container not created, a
// reservation not begun at its window): nothing ran and nothing is
// charged, and the renter auctions the job again at once elsewhere.
const StatusNotStarted Status = "not-started"

// RenterMsg is what a renter sends on a job stream after the start request.
type RenterMsg struct {
	Voucher []byte `json:"voucher"`
}

// Write and Read frame JSON messages (p2p.WriteJSON, p2p.ReadJSON).
// Decoding is strict: unknown fields and trailing data are errors, and the
// frame size is checked against the reader's limit by p2p.ReadFrame before
// anything is read.
func Write(w io.Writer, v any) error { return p2p.WriteJSON(w, v, MaxJobFrame) }

// Read reads one framed JSON message of at most limit bytes into v.
func Read(r io.Reader, limit int, v any) error { return p2p.ReadJSON(r, limit, v) }

// Decode decodes one message's JSON strictly.
func Decode(b []byte, v any) error { return p2p.DecodeJSON(b, v) }

// LeaseCID is the CID of a co-signed lease's wire bytes; "" if they do not
// verify.
func LeaseCID(raw []byte) string {
	_, sl, err := auction.DecodeSignedLease(raw, true)
	if err != nil {
		return ""
	}
	return sl.CID().String()
}
