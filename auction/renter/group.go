package renter

import (
	"context"
	"sync"
)

// Group is one replica group: jobs that run the same spec on different
// providers so that their outputs can be compared. Its members' auctions
// run one at a time, and each excludes the providers the others hold, so
// two replicas never share a provider even when they are placed at once.
// The zero value is not usable; call NewGroup.
type Group struct {
	turn chan struct{} // one auction at a time; a channel, so waiting honours ctx

	mu   sync.Mutex        // guards held
	held map[string]string // job ID -> the provider its latest lease is with
}

// NewGroup returns an empty replica group.
func NewGroup() *Group {
	return &Group{turn: make(chan struct{}, 1), held: map[string]string{}}
}

// Hold records that job's lease is with provider, so that no sibling is
// placed there. Auction calls it for a member's winner before the next
// member's round; a node restoring a group after a restart calls it for
// every member on record.
func (g *Group) Hold(jobID, provider string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held[jobID] = provider
}

// Release forgets job's provider, so that a sibling may be placed there
// again: a service calls it for a replica it dropped (replaced or scaled
// down). Releasing a job the group does not hold does nothing.
func (g *Group) Release(jobID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.held, jobID)
}

// Held returns a copy of every member's provider, by job ID.
func (g *Group) Held() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]string, len(g.held))
	for j, p := range g.held {
		out[j] = p
	}
	return out
}

// enter waits for the group's turn and returns the providers the other
// members hold; leave ends the turn.
func (g *Group) enter(ctx context.Context, jobID string) (leave func(), siblings map[string]bool, err error) {
	select {
	case g.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	siblings = map[string]bool{}
	for j, p := range g.Held() {
		if j != jobID && p != "" {
			siblings[p] = true
		}
	}
	return func() { <-g.turn }, siblings, nil
}
