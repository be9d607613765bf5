package wire

import (
	"fmt"
	"io"
	"regexp"

	"github.com/gleaner-net/gleaner/p2p"
)

// The service protocol (docs/SERVICES.md, "Reaching a service's
// container"): a renter reaches its service job's container through the
// provider. A stream carries one header frame (the job), one reply frame
// (empty, or a refusal), then raw bytes both ways to the container's
// port. The provider's side is providing.Forwarder; the renter's opens
// the stream and calls OpenService.

// ServiceProto is the service stream's protocol, scoped by p2p to /gleaner/N/.
const ServiceProto = "service/1"

// The codes of a refused service stream (ServiceReply.Code).
const (
	ServiceRefused     = "refused"     // not the lease's renter, or no such service here
	ServiceBusy        = "busy"        // too many streams open for this peer or job
	ServiceUnreachable = "unreachable" // the container's port does not answer
	ServiceMalformed   = "malformed"   // the header frame is not one
)

// Frame limits of the opening.
const (
	MaxServiceHeader = 512  // a job ID and a little JSON
	MaxServiceReply  = 1024 // a code and one line of why
)

// ServiceHeader opens a stream: which job's service.
type ServiceHeader struct {
	Job string `json:"job"`
}

// ServiceReply answers it: no Code means the raw bytes follow.
type ServiceReply struct {
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

// ServiceJobPattern is what a service header's job ID must match.
var ServiceJobPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// DecodeServiceHeader is strict: one JSON object, no unknown fields, a
// job ID that could name a job.
func DecodeServiceHeader(b []byte) (ServiceHeader, error) {
	var h ServiceHeader
	if len(b) > MaxServiceHeader {
		return h, fmt.Errorf("service header of %d bytes > %d", len(b), MaxServiceHeader)
	}
	if err := p2p.DecodeJSON(b, &h); err != nil {
		return ServiceHeader{}, err
	}
	if !ServiceJobPattern.MatchString(h.Job) {
		return ServiceHeader{}, fmt.Errorf("service header: job ID %q must match %s", h.Job, ServiceJobPattern)
	}
	return h, nil
}

// ServiceError is the provider's refusal of a service stream.
type ServiceError struct {
	Code    string // ServiceRefused, ServiceBusy, ServiceUnreachable, ServiceMalformed
	Message string
}

func (e *ServiceError) Error() string {
	return fmt.Sprintf("service stream refused (%s): %s", e.Code, e.Message)
}

// OpenService is the renter's half of a service stream's opening: it
// sends the header for jobID and reads the reply. nil: the raw bytes
// follow on s; a *ServiceError: the provider refused; any other error:
// the stream failed. The caller bounds it with s's deadlines.
func OpenService(s io.ReadWriter, jobID string) error {
	if err := p2p.WriteJSON(s, ServiceHeader{Job: jobID}, MaxServiceHeader); err != nil {
		return err
	}
	var rep ServiceReply
	if err := p2p.ReadJSON(s, MaxServiceReply, &rep); err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	if rep.Code != "" {
		return &ServiceError{Code: rep.Code, Message: rep.Error}
	}
	return nil
}
