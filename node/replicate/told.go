package replicate

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Relaying an author's head to peers the author told itself is wasted: in
// a full mesh every node that stores an entry would tell every other, 380
// pushes for one entry among 20 nodes (docs/PERFORMANCE.md, "What those 20
// ms wait behind"). So an author's "have" of its own head names the peers
// it queued that head for ("told", ledger-sync/2 only), and a node that
// relays the head skips them: they heard from the author, are connected
// to it, and fetch from it. Only an author's list of its own head is
// taken, so a third party cannot keep another node's feed from anyone;
// an author that lies delays only its own feed, which anti-entropy still
// repairs. A peer the list does not name (a spoke behind a hub) is told as
// before.

// maxToldAuthors bounds the authors whose lists are remembered; past it
// the memory starts over (a relay to a peer that was told costs one
// push, as it did before lists).
const maxToldAuthors = 1024

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

// record keeps author's list for its head at seq (a list for an older
// head than one already held is dropped). told holds peer IDs as strings;
// one that does not parse is skipped.
func (t *toldList) record(author string, seq uint64, told []string) {
	peers := make(map[peer.ID]struct{}, len(told))
	for _, s := range told {
		if p, err := peer.Decode(s); err == nil {
			peers[p] = struct{}{}
		}
	}
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

// covers says whether p needs no relay of author's head at seq: p is the
// author, or the author told p of this head or a later one.
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
