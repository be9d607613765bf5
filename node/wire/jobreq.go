package wire

import (
	"io"
)

// A job request travels in two frames, so that a peer cannot make a
// provider buffer megabytes before it has shown it holds a lease: the
// head (JobHead, at most MaxJobHeadFrame) names the request and the
// lease, and only a start carries a body (JobBody, at most MaxJobFrame),
// which the provider reads after it has checked that the lease is active
// and the peer is its renter. JobRequest is the whole request as both
// sides hold it in memory.

// JobHead is a job request's first frame.
type JobHead struct {
	Kind  string `json:"kind"` // "start", "attach" or "cancel"
	Lease []byte `json:"lease"`
	// Nonce is echoed by every signed telemetry sample of a started run.
	Nonce []byte `json:"nonce,omitempty"`
}

// JobBody is a start's second frame: what runs, and with what.
type JobBody struct {
	Spec         []byte            `json:"spec"`
	Secrets      map[string]string `json:"secrets,omitempty"`
	Checkpoint   []byte            `json:"checkpoint,omitempty"`
	RegistryAuth *RegistryAuth     `json:"registry_auth,omitempty"`
	Gang         []byte            `json:"gang,omitempty"` // a gang member's roster (JobRequest.Gang)
}

// Head is the request's first frame.
func (r *JobRequest) Head() JobHead { return JobHead{Kind: r.Kind, Lease: r.Lease, Nonce: r.Nonce} }

// Body is a start's second frame.
func (r *JobRequest) Body() JobBody {
	return JobBody{Spec: r.Spec, Secrets: r.Secrets, Checkpoint: r.Checkpoint, RegistryAuth: r.RegistryAuth, Gang: r.Gang}
}

// WithBody is the request whose head is h, with b's contents.
func (h JobHead) WithBody(b JobBody) JobRequest {
	return JobRequest{Kind: h.Kind, Lease: h.Lease, Nonce: h.Nonce, Spec: b.Spec, Secrets: b.Secrets,
		Checkpoint: b.Checkpoint, RegistryAuth: b.RegistryAuth, Gang: b.Gang}
}

// WriteJobRequest writes r as the renter sends it: its head, and for a
// start its body.
func WriteJobRequest(w io.Writer, r *JobRequest) error {
	if err := Write(w, r.Head()); err != nil {
		return err
	}
	if r.Kind != "start" {
		return nil
	}
	return Write(w, r.Body())
}

// ReadJobHead reads a job request's head: a small frame.
func ReadJobHead(r io.Reader) (JobHead, error) {
	var h JobHead
	err := Read(r, MaxJobHeadFrame, &h)
	return h, err
}

// ReadJobBody reads a start's body; the provider calls it only once the
// head's lease has been checked.
func ReadJobBody(r io.Reader) (JobBody, error) {
	var b JobBody
	err := Read(r, MaxJobFrame, &b)
	return b, err
}
