package replicate

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Bounds on what other peers can make this node hold, in memory or on
// disk, by announcing heads. Every announcement is validated first (see
// validHead); these caps apply to the valid ones, because a peer can sign
// as many feeds as it likes.
const (
	maxHeadsPerMsg = 256                       // heads in one "have" push
	maxHeadsServed = 16384                     // heads in one heads response, either way
	maxHeadsFrame  = maxHeadsServed * 256      // bytes of that response
	maxSyncRequest = maxHeadsPerMsg*256 + 1024 // bytes of one sync request

	maxRangesPerRequest  = 64   // feeds asked for in one request
	maxEntriesPerRequest = 1024 // entries asked for in one request, all feeds together

	maxReconciles = 4    // heads exchanges in flight, each holding up to maxHeadsFrame
	maxServing    = 32   // sync requests answered at once; more are refused
	maxPushPeers  = 64   // peers told of new heads per round
	maxOutbox     = 1024 // heads queued for one peer; past it, news waits for anti-entropy

	// maxServingPerPeer is one peer's share of maxServing, so that a peer
	// holding streams open (not reading our answers, say) takes 4 slots,
	// not all 32. An honest peer has up to fetchWorkers fetches, a heads
	// exchange and a push in flight with us, each answered in
	// milliseconds, so it seldom waits for its own share, and then
	// briefly (serveWait).
	maxServingPerPeer = 4

	maxPending        = 4096 // feeds waiting to be fetched, from all peers
	maxPendingPerPeer = 1024 // of them created by one peer's announcements
	peerBurst         = 1024 // feeds one peer may add to the wait list at once
	peerRate          = 64   // ... and per second after that
	maxSources        = 4    // peers remembered as holding one wanted feed
	maxPeersTracked   = 4096 // peers with a spent budget remembered
	maxFollowed       = 1024 // feeds asked for explicitly (follow)
	pendingTTL        = 2 * time.Minute
	maxSourceFails    = 3 // failed fetches before a source is forgotten

	// syncRequestWait is how long a peer has to send a whole sync request
	// once it opened the stream. A request is at most maxSyncRequest
	// bytes, sent at once by an honest peer; a peer that trickles one
	// holds a stream (and its read buffer) no longer than this, and no
	// serving slot at all.
	syncRequestWait = 3 * time.Second

	// maxForeignFeeds caps the feeds this node keeps of peers it never
	// dealt with: past it, a feed is fetched only if its author is
	// connected to us (a peer we deal with or are considering) or the
	// feed was asked for. Feeds already held keep being updated.
	maxForeignFeeds = 10000
)

// servingSlots are the sync requests this node works on at once: at most
// maxServing in all and maxServingPerPeer of one peer.
type servingSlots struct {
	mu     sync.Mutex      // guards used, byPeer and freed
	used   int             // slots taken, all peers together
	byPeer map[peer.ID]int // slots taken per peer; a peer at zero has no entry
	freed  chan struct{}   // closed (and replaced) when a slot is given back
}

func newServingSlots() *servingSlots {
	return &servingSlots{byPeer: make(map[peer.ID]int), freed: make(chan struct{})}
}

// take waits up to wait for a slot for p; false: none came free.
func (sl *servingSlots) take(p peer.ID, wait time.Duration) bool {
	var timeout <-chan time.Time
	for {
		sl.mu.Lock()
		if sl.used < maxServing && sl.byPeer[p] < maxServingPerPeer {
			sl.used++
			sl.byPeer[p]++
			sl.mu.Unlock()
			return true
		}
		freed := sl.freed
		sl.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			return false
		}
	}
}

// give hands back a slot p took.
func (sl *servingSlots) give(p peer.ID) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.used--
	if sl.byPeer[p]--; sl.byPeer[p] <= 0 {
		delete(sl.byPeer, p)
	}
	close(sl.freed)
	sl.freed = make(chan struct{})
}

// stats is the slots taken and how many peers hold any, for tests.
func (sl *servingSlots) stats() (used int, peers int) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.used, len(sl.byPeer)
}

// Reasons an announced head is not taken up, recorded so that a test or an
// operator can see which bound held.
const (
	refuseNone       = ""
	refusePending    = "wait list full"
	refusePeerQuota  = "peer's share of the wait list used"
	refusePeerRate   = "peer's announcement budget spent"
	refuseForeignCap = "foreign feed cap reached"
)

// want is a feed this node means to fetch: the highest head heard of, and
// the connected peers that said they hold it.
type want struct {
	seq     uint64 // highest head announced
	check   uint64 // a seq we hold where a peer has another entry: fetch it to catch the fork
	sources map[peer.ID]*source
	owner   peer.ID // whose announcement created it: counted against that peer's share
	isNew   bool    // none of the feed was held when it was created
	queued  bool
	busy    bool // a fetch worker has it
	created time.Time
}

type source struct {
	seq   uint64 // how far the peer said it holds the feed
	fails int
}

// wantTask is what a fetch worker gets: a copy, so the worker needs no lock.
type wantTask struct {
	author  string
	seq     uint64
	check   uint64
	sources map[peer.ID]uint64
}

// budget is a token bucket of new wait-list entries for one peer.
type budget struct {
	tokens float64
	at     time.Time
}

// wantList is the bounded set of feeds this node is fetching, fed by
// announcements and drained by the fetch workers. Its mutex guards every
// field; nothing in it does I/O.
type wantList struct {
	mu       sync.Mutex
	wants    map[string]*want
	queue    []string // authors ready to fetch, oldest first
	byPeer   map[peer.ID]int
	budgets  map[peer.ID]*budget
	followed map[string]struct{}
	held     int            // foreign feeds stored
	newFeeds int            // wants for feeds none of which is stored yet
	admitted int            // wants ever created
	refused  map[string]int // offers refused, by reason
	ready    chan struct{}  // poked when queue grows
}

func newWantList() *wantList {
	return &wantList{
		wants:    make(map[string]*want),
		byPeer:   make(map[peer.ID]int),
		budgets:  make(map[peer.ID]*budget),
		followed: make(map[string]struct{}),
		refused:  make(map[string]int),
		ready:    make(chan struct{}, 1),
	}
}

// offer records that src, a connected peer, holds author's feed up to seq
// (check > 0: holds another entry at check, a seq we hold). isNew says we
// hold none of the feed; dealsWith that its author is a peer we deal with.
// It returns why the offer was refused, or refuseNone.
func (wl *wantList) offer(author string, seq, check uint64, src peer.ID, isNew, dealsWith bool, now time.Time) string {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	w, ok := wl.wants[author]
	if !ok {
		if why := wl.admit(author, src, isNew, dealsWith, now); why != refuseNone {
			wl.refused[why]++
			return why
		}
		w = &want{sources: make(map[peer.ID]*source), owner: src, isNew: isNew, created: now}
		wl.wants[author] = w
		wl.admitted++
		wl.byPeer[src]++
		if isNew {
			wl.newFeeds++
		}
	}
	w.seq = max(w.seq, seq)
	if check > 0 {
		w.check = check
	}
	if s, ok := w.sources[src]; ok {
		s.seq = max(s.seq, seq)
	} else if len(w.sources) < maxSources {
		w.sources[src] = &source{seq: seq}
	} else {
		// Replace the source that holds least, if this one holds more.
		var low peer.ID
		for p, s := range w.sources {
			if low == "" || s.seq < w.sources[low].seq {
				low = p
			}
		}
		if w.sources[low].seq < seq {
			delete(w.sources, low)
			w.sources[src] = &source{seq: seq}
		}
	}
	wl.enqueue(author, w)
	return refuseNone
}

// admit decides whether a new want may be created; it charges src's
// budget when it may.
func (wl *wantList) admit(author string, src peer.ID, isNew, dealsWith bool, now time.Time) string {
	if len(wl.wants) >= maxPending {
		return refusePending
	}
	if wl.byPeer[src] >= maxPendingPerPeer {
		return refusePeerQuota
	}
	if _, ok := wl.followed[author]; isNew && !dealsWith && !ok && wl.held+wl.newFeeds >= maxForeignFeeds {
		return refuseForeignCap
	}
	b := wl.budgets[src]
	if b == nil {
		if len(wl.budgets) >= maxPeersTracked {
			return refusePeerRate
		}
		b = &budget{tokens: peerBurst, at: now}
		wl.budgets[src] = b
	}
	b.tokens = min(peerBurst, b.tokens+now.Sub(b.at).Seconds()*peerRate)
	b.at = now
	if b.tokens < 1 {
		return refusePeerRate
	}
	b.tokens--
	return refuseNone
}

func (wl *wantList) enqueue(author string, w *want) {
	if w.queued || w.busy {
		return
	}
	w.queued = true
	wl.queue = append(wl.queue, author)
	select {
	case wl.ready <- struct{}{}:
	default:
	}
}

// next blocks until wants are ready and hands up to n of them to the
// calling worker, who must settle each.
func (wl *wantList) next(ctx context.Context, n int) ([]wantTask, bool) {
	for {
		wl.mu.Lock()
		var ts []wantTask
		for len(wl.queue) > 0 && len(ts) < n {
			author := wl.queue[0]
			wl.queue[0] = ""
			wl.queue = wl.queue[1:]
			w, ok := wl.wants[author]
			if !ok || !w.queued {
				continue
			}
			w.queued, w.busy = false, true
			t := wantTask{author: author, seq: w.seq, check: w.check, sources: make(map[peer.ID]uint64, len(w.sources))}
			for p, s := range w.sources {
				t.sources[p] = s.seq
			}
			ts = append(ts, t)
		}
		if len(wl.queue) == 0 {
			wl.queue = nil // drop the backing array a burst grew
		}
		more := len(wl.queue) > 0
		wl.mu.Unlock()
		if len(ts) > 0 {
			if more { // let another worker in
				select {
				case wl.ready <- struct{}{}:
				default:
				}
			}
			return ts, true
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-wl.ready:
		}
	}
}

// settle ends a worker's attempt on author. have is our head now; checked
// is the fork check it did (0: none); failed is a source that did not
// deliver (""), which is retried after a back-off and forgotten after
// maxSourceFails; gone are sources that are no longer connected.
func (wl *wantList) settle(author string, have, checked uint64, failed peer.ID, gone []peer.ID) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	w, ok := wl.wants[author]
	if !ok {
		return
	}
	w.busy = false
	if checked > 0 && w.check == checked {
		w.check = 0
	}
	for _, p := range gone {
		delete(w.sources, p)
	}
	var backoff time.Duration
	if s, ok := w.sources[failed]; ok {
		s.fails++
		if s.fails >= maxSourceFails {
			delete(w.sources, failed)
		} else {
			backoff = 100 * time.Millisecond << s.fails
		}
	}
	// A source that holds no further than we do now has nothing left to
	// give (unless for the fork check).
	for p, s := range w.sources {
		if s.seq <= have && (w.check == 0 || s.seq < w.check) {
			delete(w.sources, p)
		}
	}
	if (w.seq <= have && w.check == 0) || len(w.sources) == 0 {
		wl.remove(author, w)
		return
	}
	if backoff > 0 {
		w.busy = true // nobody else takes it while it waits
		time.AfterFunc(backoff, func() {
			wl.mu.Lock()
			defer wl.mu.Unlock()
			if cur, ok := wl.wants[author]; ok && cur == w {
				w.busy = false
				wl.enqueue(author, w)
			}
		})
		return
	}
	wl.enqueue(author, w)
}

// release hands back a want a worker took but did not fetch; it goes to
// the head of the queue.
func (wl *wantList) release(author string) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	w, ok := wl.wants[author]
	if !ok || !w.busy {
		return
	}
	w.busy, w.queued = false, true
	wl.queue = append([]string{author}, wl.queue...)
	select {
	case wl.ready <- struct{}{}:
	default:
	}
}

// drop forgets a want, whatever its state (a frozen feed, say).
func (wl *wantList) drop(author string) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if w, ok := wl.wants[author]; ok {
		wl.remove(author, w)
	}
}

func (wl *wantList) remove(author string, w *want) {
	delete(wl.wants, author)
	if wl.byPeer[w.owner]--; wl.byPeer[w.owner] <= 0 {
		delete(wl.byPeer, w.owner)
	}
	if w.isNew {
		wl.newFeeds--
	}
}

// stored notes that the first entry of a foreign feed was stored.
func (wl *wantList) stored(author string) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	wl.held++
	if w, ok := wl.wants[author]; ok && w.isNew {
		w.isNew = false
		wl.newFeeds--
	}
}

// follow asks for author's feed whatever the foreign feed cap; false when
// maxFollowed feeds are followed already.
func (wl *wantList) follow(author string) bool {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if _, ok := wl.followed[author]; ok {
		return true
	}
	if len(wl.followed) >= maxFollowed {
		return false
	}
	wl.followed[author] = struct{}{}
	return true
}

// sweep forgets wants that outlived pendingTTL (a safety net: a want
// normally ends when fetched or when its sources fail) and budgets that
// have refilled, which are the same as none.
func (wl *wantList) sweep(now time.Time) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	for a, w := range wl.wants {
		if !w.busy && now.Sub(w.created) > pendingTTL {
			w.queued = false
			wl.remove(a, w)
		}
	}
	for p, b := range wl.budgets {
		if b.tokens+now.Sub(b.at).Seconds()*peerRate >= peerBurst {
			delete(wl.budgets, p)
		}
	}
}

// wantStats is a snapshot for tests and diagnostics.
type wantStats struct {
	pending, queued, held, newFeeds, peers, budgets, admitted int
	byPeer                                                    map[peer.ID]int
	refused                                                   map[string]int
}

func (wl *wantList) stats() wantStats {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	st := wantStats{
		pending: len(wl.wants), queued: len(wl.queue), held: wl.held, newFeeds: wl.newFeeds,
		peers: len(wl.byPeer), budgets: len(wl.budgets), admitted: wl.admitted,
		byPeer: make(map[peer.ID]int, len(wl.byPeer)), refused: make(map[string]int, len(wl.refused)),
	}
	for p, n := range wl.byPeer {
		st.byPeer[p] = n
	}
	for r, n := range wl.refused {
		st.refused[r] = n
	}
	return st
}
