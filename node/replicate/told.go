package replicate

import (
	"math/rand/v2"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Relaying an author's head to peers the author told itself is mostly
// wasted: in a full mesh every node that stores an entry would tell every
// other, 380 pushes for one entry among 20 nodes (docs/PERFORMANCE.md,
// "What those 20 ms wait behind"). So an author's "have" of its own head
// names the peers it queued that head for over a direct connection
// ("told", ledger-sync/2 only), and a node that relays the head tells only
// crossCheckPeers of those it is connected to, picked at random, besides
// the peers the list does not name (a spoke behind a hub is told as
// before). A listed peer whose push from the author failed hears from a
// relayer's picks, or at the latest from anti-entropy (30 s).
//
// The cross-check is what keeps forks caught within a hop: an
// equivocating author can show one entry to some peers and another to
// the rest, naming all of them on every list. Each relayer still pushes
// its branch to a couple of the others at random, and a peer holding the
// other branch fetches it and proves the fork (fetch.go), as before lists.
//
// Only an author's list of its own head is taken, so a third party cannot
// keep another node's feed from anyone; an author that lies delays only
// its own feed, which the cross-checks and anti-entropy still carry.

const (
	// maxToldAuthors bounds the authors whose lists are remembered; past
	// it one is forgotten at random for each new one (a relay to a peer
	// that was told costs one push, as it did before lists).
	maxToldAuthors = 1024
	// crossCheckPeers is how many of the peers on an author's list a
	// relayer still tells, picked at random: enough that two branches
	// of a fork meet within a hop
	// (TestAnEquivocatorNamingEveryPeerIsStillCaught).
	crossCheckPeers = 2
)

// toldList is what authors said they told: for each author, the latest
// seq a list came with and the peers on it.
type toldList struct {
	mu      sync.Mutex
	authors map[string]toldEntry
}

type toldEntry struct {
	seq   uint64
	peers map[peer.ID]struct{}
}

func newToldList() *toldList { return &toldList{authors: make(map[string]toldEntry)} }

// parseTold decodes a list once per message; IDs that do not parse are
// skipped.
func parseTold(told []string) map[peer.ID]struct{} {
	peers := make(map[peer.ID]struct{}, len(told))
	for _, s := range told {
		if p, err := peer.Decode(s); err == nil {
			peers[p] = struct{}{}
		}
	}
	return peers
}

// record keeps author's list for its head at seq (a list for an older
// head than one already held is dropped).
func (t *toldList) record(author string, seq uint64, peers map[peer.ID]struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.authors[author]; ok && old.seq > seq {
		return
	}
	if _, ok := t.authors[author]; !ok && len(t.authors) >= maxToldAuthors {
		for a := range t.authors { // one out, at random (map order)
			delete(t.authors, a)
			break
		}
	}
	t.authors[author] = toldEntry{seq: seq, peers: peers}
}

// skips is the peers among peers that a relay of author's head at seq
// leaves out: the author, and those the author says it told but for
// crossCheckPeers of them picked at random (the cross-check). Picking
// among the peers this node is connected to, not by a chance per peer,
// keeps the cross-check whole however long the list: an author cannot
// pad its list with made-up peers to make the picks rare. nil: the
// author has given no list for this head.
func (t *toldList) skips(author string, seq uint64, peers []peer.ID) map[peer.ID]bool {
	// The author decoded once, not each peer encoded: this runs for
	// every relayed head in every round.
	a, _ := peer.Decode(author)
	t.mu.Lock()
	e, ok := t.authors[author]
	var listed []peer.ID
	if ok && e.seq >= seq {
		for _, p := range peers {
			if _, told := e.peers[p]; told && p != a {
				listed = append(listed, p)
			}
		}
	}
	t.mu.Unlock()
	if !ok || e.seq < seq {
		return nil
	}
	rand.Shuffle(len(listed), func(i, j int) { listed[i], listed[j] = listed[j], listed[i] })
	skip := make(map[peer.ID]bool, len(listed)+1)
	for _, p := range listed[min(crossCheckPeers, len(listed)):] {
		skip[p] = true
	}
	if a != "" {
		skip[a] = true
	}
	return skip
}
