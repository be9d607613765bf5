package service

import "github.com/gleaner-net/gleaner/auction"

// Action is one thing a Tick asks the node to do, in the order given.
type Action interface{ action() }

// PlaceKind says what a Place is for.
type PlaceKind int

const (
	// Replace: a replica whose job ended is replaced at its index.
	Replace PlaceKind = iota
	// Add: one more replica, at the next index.
	Add
	// Renew: a successor for a replica whose lease ends soon, to take its
	// index once ready (make before break).
	Renew
)

func (k PlaceKind) String() string {
	switch k {
	case Replace:
		return "replace"
	case Add:
		return "add"
	case Renew:
		return "renew"
	}
	return "unknown"
}

// Place asks the node to buy a replica: submit Spec as a job of the
// service's, never on a provider in Exclude, and report the job (or the
// failure) with Placed. Placed's false ends the Tick's placements of the
// same Kind: the node carries out none of them. A Replace that succeeds
// also takes Old's place: the node releases Old's provider and drops Old,
// as for Release and Drop.
type Place struct {
	Kind  PlaceKind
	Index int
	// Old is the job replaced (Replace) or renewed (Renew).
	Old  string
	Spec *auction.JobSpec
	// Exclude are the providers the service's other live replicas (and,
	// for a Renew, the replica renewed) hold, by their job: two replicas
	// of a service never share a provider. The node's auction group holds
	// them for the auction (and keeps the set current while it runs).
	Exclude map[string]string
	// Avoid are providers asked only after every other: the one a
	// replaced replica failed with.
	Avoid []string
	// Why, for the log and the replacement's note.
	Why string

	noMatch bool // a Replace of a replica no provider took
}

// Release asks the node to let Job's provider take the service's other
// replicas again (the job no longer is one of them).
type Release struct{ Job string }

// Drop asks the node to take Job out of the gateway and forget it.
type Drop struct{ Job string }

// Cancel asks the node to cancel Job (its provider stops it, its billing
// ends); a Drop follows once it is no replica any more.
type Cancel struct{ Job string }

// Retire asks the node to drain Job (a successor took its index) out of
// the gateway, the requests in flight on it answered, then cancel it; the
// node keeps it in the record's Retiring until it is cancelled.
type Retire struct{ Job string }

// Save says the Record changed: the node writes it.
type Save struct{}

// Log is a line for the node's log: what was decided, and why.
type Log struct {
	Warn bool
	Msg  string
	Args []any // slog's key-value pairs
}

func (Place) action()   {}
func (Release) action() {}
func (Drop) action()    {}
func (Cancel) action()  {}
func (Retire) action()  {}
func (Save) action()    {}
func (Log) action()     {}
