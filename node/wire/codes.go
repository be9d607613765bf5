package wire

import (
	"strings"
)

// Code is the typed reason of a provider's error event: a renter chooses
// what to do next by it, never by the provider's English words.
type Code string

const (
	// CodeNoLease: the provider holds no active lease for the job (it
	// ended, was superseded, or the provider restarted without it).
	CodeNoLease Code = "no-lease"
	// CodeDisplaced: the award was not started within its grace and
	// another award took its GPUs (the newcomer rule): nobody failed.
	CodeDisplaced Code = "displaced"
	// CodeExpired: the award was not started in time.
	CodeExpired Code = "expired"
	// CodeStarted: the lease has started already: attach to follow it.
	CodeStarted Code = "started"
	// CodeNotRunning: the lease is held but its job is not running (a
	// restarted provider held it again): start it again.
	CodeNotRunning Code = "not-running"
	// CodePull: not started, the image could not be pulled.
	CodePull Code = "pull"
	// CodeInputs: not started, the job's inputs could not be fetched.
	CodeInputs Code = "inputs"
	// CodeStart: not started for another reason (a container that would
	// not start, a reservation that failed at its window).
	CodeStart Code = "start"
	// CodeOutputs: on an exit event, the job ran but its outputs were
	// not kept (they passed the spec's outputs.max_size): no CID.
	CodeOutputs Code = "outputs"
	// CodeRefused: any other refusal (not the lease's renter, another
	// spec than the lease names, the owner's policy): final.
	CodeRefused Code = "refused"
)

// The words of the providers that predate Code, which LegacyCode reads.
const (
	legacyNoLease    = "no active lease for this job"
	legacyDisplaced  = "the award was displaced"
	legacyStarted    = "this lease has started already"
	legacyNotRunning = "the job is not running"
	legacyExpired    = "this award expired"
	legacyPull       = "the image could not be pulled: "
	legacyInputs     = "the job's inputs could not be fetched: "
)

// LegacyCode is the code of an error event from a provider that sent
// none: read from its words, which such providers wrote as these.
// Anything else maps to CodeStart for a not-started event and to
// CodeRefused otherwise.
func LegacyCode(ev Event) Code {
	if ev.Code != "" {
		return ev.Code
	}
	switch e := ev.Error; {
	case strings.Contains(e, legacyDisplaced):
		return CodeDisplaced
	case strings.Contains(e, legacyNoLease):
		return CodeNoLease
	case strings.Contains(e, legacyStarted):
		return CodeStarted
	case strings.Contains(e, legacyNotRunning):
		return CodeNotRunning
	case strings.Contains(e, legacyExpired):
		return CodeExpired
	case ev.Status == StatusNotStarted && strings.HasPrefix(e, legacyPull):
		return CodePull
	case ev.Status == StatusNotStarted && strings.HasPrefix(e, legacyInputs):
		return CodeInputs
	case ev.Status == StatusNotStarted:
		return CodeStart
	}
	return CodeRefused
}
