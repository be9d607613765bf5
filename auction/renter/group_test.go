package renter

import (
	"context"
	"testing"
)

// TestGroupReleaseFreesTheProvider: a released member's provider is no
// longer kept from its siblings, and the others' still are.
func TestGroupReleaseFreesTheProvider(t *testing.T) {
	g := NewGroup()
	g.Hold("a", "p1")
	g.Hold("b", "p2")
	leave, sib, err := g.enter(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	leave()
	if !sib["p1"] || !sib["p2"] {
		t.Fatalf("before release: siblings %v", sib)
	}
	g.Release("a")
	g.Release("nobody") // not held: nothing happens
	leave, sib, err = g.enter(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	leave()
	if sib["p1"] || !sib["p2"] || len(sib) != 1 {
		t.Fatalf("after releasing a: siblings %v", sib)
	}
	if h := g.Held(); len(h) != 1 || h["b"] != "p2" {
		t.Fatalf("held after release: %v", h)
	}
}
