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
// crossCheckPeers of them, picked at random, besides the peers the list
// does not name (a spoke behind a hub is told as before).
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
	// it the memory starts over (a relay to a peer that was told costs
	// one push, as it did before lists).
	maxToldAuthors = 1024
	// crossCheckPeers is how many of the peers on an author's list a
	// relayer still tells, on average: enough that two branches of a fork
	// meet within a hop (TestAnEquivocatorNamingEveryPeerIsStillCaught).
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
		clear(t.authors)
	}
	t.authors[author] = toldEntry{seq: seq, peers: peers}
}

// covers says whether the author said it told p of its head at seq (or a
// later one); p being the author counts.
func (t *toldList) covers(author string, seq uint64, p peer.ID) bool {
	if p.String() == author {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.authors[author]
	if !ok || e.seq < seq {
		return false
	}
	_, told := e.peers[p]
	return told
}

// relayTo says whether a relay of author's head at seq goes to p: never
// to the author; to a peer the author says it told, with a chance of
// crossCheckPeers in the list's length (the cross-check); to any other
// peer, always.
func (t *toldList) relayTo(author string, seq uint64, p peer.ID) bool {
	if p.String() == author {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.authors[author]
	if !ok || e.seq < seq {
		return true
	}
	if _, told := e.peers[p]; !told {
		return true
	}
	return rand.IntN(len(e.peers)) < crossCheckPeers
}
