package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// Exit codes, documented in `gleaner --help` and the README.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitInterrupted is the shell's 128+SIGINT: the user stopped the
	// command, not the work it started.
	exitInterrupted = 130
)

// interruptedError is Ctrl-C (or SIGTERM) while a command waited on work
// that goes on without it, such as a job that keeps running.
type interruptedError struct{ msg, hint string }

func (e *interruptedError) Error() string { return e.msg }

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
func report(w io.Writer, err error) int { return reportAs(w, err, false) }

// reportAs is report; asJSON prints the same as one JSON object instead
// (see reportJSON), for a command line with --json.
func reportAs(w io.Writer, err error, asJSON bool) int {
	if err == nil {
		return exitOK
	}
	f := classify(err)
	if asJSON {
		reportJSON(w, f)
		return f.Code
	}
	fmt.Fprintf(w, "gleaner: %s\n", f.Message)
	if f.Hint != "" {
		fmt.Fprintf(w, "hint: %s\n", f.Hint)
	}
	return f.Code
}

// failure is an error as the CLI reports it: its exit code, a one-line
// message, an optional hint and, for an error of the node's API, the
// JSON-RPC code (in --json output only: the text never shows it).
type failure struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	RPCCode int    `json:"rpc_code,omitempty"`
}

func classify(err error) failure {
	var ue *usageError
	if errors.As(err, &ue) {
		return failure{Code: exitUsage, Message: ue.msg, Hint: ue.hint}
	}
	var ie *interruptedError
	if errors.As(err, &ie) {
		return failure{Code: exitInterrupted, Message: ie.msg, Hint: ie.hint}
	}
	f := failure{Code: exitFailure, Message: err.Error()}
	var re *rpc.Error
	if errors.As(err, &re) {
		// rpc.Error's own text ends in "(code N)": the message alone,
		// with whatever the CLI wrapped it in.
		f.Message = strings.ReplaceAll(f.Message, re.Error(), re.Message)
		f.RPCCode = re.Code
		if re.Code == rpc.CodeInvalidParams || re.Code == renting.CodeBadJobSpec {
			f.Code = exitUsage
		}
	}
	// A command that stands for a process of its own (job run and its
	// job's exit code) exits as that process did.
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		f.Code = ec.ExitCode()
	}
	var h *hinted
	if errors.As(err, &h) && h.hint != "" {
		f.Hint = h.hint
	}
	return f
}
