package renting

import "testing"

// A member told to start can still be told to let go: the gang stops a
// running member through the same signal it would release an award by.
func TestMemberSignalReleasesAfterStart(t *testing.T) {
	m := &memberSignal{start: make(chan struct{}), release: make(chan struct{})}
	m.goAhead()
	m.goAhead() // at most once, however often the driver says it
	m.letGo()
	for name, c := range map[string]chan struct{}{"start": m.start, "release": m.release} {
		select {
		case <-c:
		default:
			t.Fatalf("%s was not signalled", name)
		}
	}
}
