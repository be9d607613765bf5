package attest

import (
	"context"
	"sync"
)

// Fake is a settable Source for tests in other packages: set an inventory
// (or an error) and every Inventory call returns a copy of it until the
// next Set. Safe for concurrent use.
type Fake struct {
	mu     sync.Mutex // guards everything below
	inv    Inventory
	err    error
	calls  int
	closed bool
}

// NewFake returns a Fake serving inv. An empty Source field reads "fake".
func NewFake(inv Inventory) *Fake {
	f := &Fake{}
	f.Set(inv)
	return f
}

// Set replaces the inventory and clears any error set by SetError.
func (f *Fake) Set(inv Inventory) {
	if inv.Source == "" {
		inv.Source = "fake"
	}
	inv = inv.Clone() // the caller may keep editing its copy
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inv, f.err = inv, nil
}

// SetError makes Inventory fail with err until the next Set.
func (f *Fake) SetError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Calls reports how many times Inventory has been called.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Closed reports whether Close has been called.
func (f *Fake) Closed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// Inventory returns a deep copy of the current inventory, or the error.
func (f *Fake) Inventory(ctx context.Context) (Inventory, error) {
	if err := ctx.Err(); err != nil {
		return Inventory{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return Inventory{}, f.err
	}
	return f.inv.Clone(), nil
}

// Close records the call; a closed Fake keeps answering, since tests often
// inspect a source after the component under test has closed it.
func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}
