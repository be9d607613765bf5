package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// Exit codes, documented in `gleaner --help` and the README.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks a mistake in how the command was called (exit code 2).
type usageError struct{ msg, hint string }

func (e *usageError) Error() string { return e.msg }

func usagef(hint, format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...), hint: hint}
}

// hinted is a failure with a suggestion of what to do next.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() }
func (h *hinted) Unwrap() error { return h.err }

func withHint(err error, hint string) error { return &hinted{err: err, hint: hint} }

// report prints err as one line plus an optional hint, never a stack trace,
// and returns the exit code.
func report(w io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "gleaner: %s\n", ue.msg)
		if ue.hint != "" {
			fmt.Fprintf(w, "hint: %s\n", ue.hint)
		}
		return exitUsage
	}
	var re *rpc.Error
	if errors.As(err, &re) {
		fmt.Fprintf(w, "gleaner: %s (code %d)\n", re.Message, re.Code)
		if re.Code == rpc.CodeInvalidParams || re.Code == node.CodeBadJobSpec {
			return exitUsage
		}
		return exitFailure
	}
	fmt.Fprintf(w, "gleaner: %s\n", err)
	var h *hinted
	if errors.As(err, &h) && h.hint != "" {
		fmt.Fprintf(w, "hint: %s\n", h.hint)
	}
	return exitFailure
}
