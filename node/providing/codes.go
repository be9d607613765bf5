package providing

import (
	"errors"
	"time"

	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/wire"
)

// errorEvent is the error event that refuses a job request for err, with
// the typed code the renter decides by (wire.Code).
func errorEvent(err error) wire.Event {
	return wire.Event{Type: wire.EventError, Error: err.Error(), Code: codeOf(err), Time: time.Now()}
}

// codeOf is the wire code of a refusal.
func codeOf(err error) wire.Code {
	switch {
	case errors.Is(err, sched.ErrDisplaced):
		return wire.CodeDisplaced
	case errors.Is(err, errNoLease), errors.Is(err, errSuperseded), errors.Is(err, sched.ErrSuperseded), errors.Is(err, sched.ErrNoLease):
		return wire.CodeNoLease
	case errors.Is(err, errStartedAlready), errors.Is(err, sched.ErrStarted):
		return wire.CodeStarted
	case errors.Is(err, errAwardExpired), errors.Is(err, sched.ErrExpired):
		return wire.CodeExpired
	}
	return wire.CodeRefused
}
