package rpc

import (
	"errors"
	"fmt"
)

// JSON-RPC 2.0 error codes. The -32700..-32600 block is fixed by the spec;
// -32001..-32009 belong to this package; the node allocates its own
// application codes from -32010 downward so the ranges never collide.
const (
	CodeParse          = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603

	CodeUnauthorized         = -32001
	CodeNeedsWebSocket       = -32002
	CodeTooManySubscriptions = -32003
	// CodeSlowSubscriber ends a subscription whose client fell more than the
	// per-subscription queue behind (see SubscriptionQueue).
	CodeSlowSubscriber = -32004
	// CodeResponseBudget answers the calls of a batch that were not run
	// because the replies before them already passed the per-batch
	// response budget (see ResponseBudget). They are safe to resend.
	CodeResponseBudget = -32005
	// CodeForbidden refuses a request whose Host is not a loopback name or
	// whose Origin is not allowed (HTTP 403), before the token is checked.
	CodeForbidden = -32006
)

// Error is a JSON-RPC error object. Handlers return it (possibly wrapped) to
// choose the code the caller sees; Client returns it for error responses.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// Error keeps the message first because node errors are shown to users as-is.
func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Errorf builds an *Error with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// toError maps a handler error onto the wire: *Error anywhere in the chain
// passes through, anything else is CodeInternal carrying the error text,
// because the node's plain errors are written for users.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

var (
	errEmptyBatch   = &Error{Code: CodeInvalidRequest, Message: "invalid request: empty batch"}
	errParse        = &Error{Code: CodeParse, Message: "parse error"}
	errTooLarge     = &Error{Code: CodeInvalidRequest, Message: "request too large"}
	errUnauthorized = &Error{Code: CodeUnauthorized, Message: "unauthorized: missing or wrong bearer token"}
	errPanic        = &Error{Code: CodeInternal, Message: "internal error"}
	errBudget       = &Error{Code: CodeResponseBudget, Message: "response budget exceeded; send smaller batches (this call did not run)"}
)
