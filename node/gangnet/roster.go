// Package gangnet is the network between a gang's members (docs/GANG_NETWORK.md):
// a gang is one job run on N providers at once, and its containers reach
// each other through their providers' libp2p connections, never the open
// internet. Each provider listens, on an address its own container
// reaches, once per other rank, and carries every TCP connection made
// there over a /gleaner/N/gang/1 stream to that rank's provider, which
// connects it to its own container's gang port. The container learns the
// addresses from GLEANER_GANG_PEERS, in rank order, so that a standard
// rendezvous (torch.distributed's MASTER_ADDR:MASTER_PORT = rank 0's
// entry) works unchanged.
//
// The package owns the roster's validation, the stream's header, the
// listeners and the forwarding; the provider's gang start (the caller)
// owns when a member joins and leaves (Net.Join, Net.Leave).
package gangnet

import (
	"fmt"
	"regexp"

	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

const (
	// MaxSize bounds a gang: one listener per other rank, so it bounds
	// the ports and goroutines a member costs its provider too.
	MaxSize = 256
	// DefaultPort is the container's gang port when the roster names none:
	// torch.distributed's customary MASTER_PORT.
	DefaultPort = 29500
)

var (
	// GangPattern is what a gang ID must match (as a job ID does).
	GangPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	// LeasePattern is what a member's lease ID (its lease's CID) must match.
	LeasePattern = regexp.MustCompile(`^[A-Za-z0-9]{1,128}$`)
)

// Member is one rank of a gang: the provider that runs it and the lease
// under which it runs there.
type Member struct {
	Rank  int     `json:"rank"`
	Peer  peer.ID `json:"peer"`
	Lease string  `json:"lease"`
}

// Roster is the whole gang as its renter placed it, given to every
// member's provider. A provider accepts a gang stream only from a peer its
// roster names, for the rank the roster gives that peer.
type Roster struct {
	Gang    string   `json:"gang"`
	Size    int      `json:"size"`
	Port    int      `json:"port,omitempty"` // the container's gang port; 0 is DefaultPort
	Members []Member `json:"members"`        // any order; Validate checks ranks 0..Size-1
}

// Validate checks what a provider relies on: a bounded size, every rank
// 0..Size-1 exactly once, distinct providers (one rank per provider, so a
// stream's peer names its rank) and distinct leases.
func (r Roster) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("gang roster %q: %s", r.Gang, fmt.Sprintf(format, args...))
	}
	switch {
	case !GangPattern.MatchString(r.Gang):
		return fmt.Errorf("gang roster: gang ID %q must match %s", r.Gang, GangPattern)
	case r.Size < 1 || r.Size > MaxSize:
		return bad("size %d outside 1..%d", r.Size, MaxSize)
	case len(r.Members) != r.Size:
		return bad("%d members for size %d", len(r.Members), r.Size)
	case r.Port < 0 || r.Port > 65535:
		return bad("port %d outside 1..65535", r.Port)
	}
	ranks := make([]bool, r.Size)
	peers := make(map[peer.ID]int, r.Size)
	leases := make(map[string]int, r.Size)
	for _, m := range r.Members {
		switch {
		case m.Rank < 0 || m.Rank >= r.Size:
			return bad("rank %d outside 0..%d", m.Rank, r.Size-1)
		case ranks[m.Rank]:
			return bad("rank %d appears twice", m.Rank)
		}
		ranks[m.Rank] = true
		if err := m.Peer.Validate(); err != nil {
			return bad("rank %d: provider: %v", m.Rank, err)
		}
		if other, dup := peers[m.Peer]; dup {
			return bad("ranks %d and %d on one provider %s", other, m.Rank, m.Peer)
		}
		peers[m.Peer] = m.Rank
		if !LeasePattern.MatchString(m.Lease) {
			return bad("rank %d: lease %q must match %s", m.Rank, m.Lease, LeasePattern)
		}
		if other, dup := leases[m.Lease]; dup {
			return bad("ranks %d and %d under one lease %s", other, m.Rank, m.Lease)
		}
		leases[m.Lease] = m.Rank
	}
	return nil
}

// MaxRosterBytes bounds a roster's encoding: MaxSize members of a peer ID,
// a lease CID and their keys fit with room to spare.
const MaxRosterBytes = 96 << 10

// DecodeRoster is how a roster that came over the network is read:
// bounded, strict JSON (no unknown fields, nothing trailing), then
// Validate.
func DecodeRoster(b []byte) (Roster, error) {
	var r Roster
	if len(b) > MaxRosterBytes {
		return r, fmt.Errorf("gang roster of %d bytes > %d", len(b), MaxRosterBytes)
	}
	if err := p2p.DecodeJSON(b, &r); err != nil {
		return Roster{}, fmt.Errorf("gang roster: %w", err)
	}
	if err := r.Validate(); err != nil {
		return Roster{}, err
	}
	return r, nil
}

// port is the container's gang port.
func (r Roster) port() int {
	if r.Port == 0 {
		return DefaultPort
	}
	return r.Port
}

// byRank is a validated roster's members indexed by rank.
func (r Roster) byRank() []Member {
	out := make([]Member, r.Size)
	for _, m := range r.Members {
		out[m.Rank] = m
	}
	return out
}
