package replicate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// FuzzHave feeds a node "have" pushes as they come off the wire, from a
// peer that names itself as the author of whatever heads it sends: the
// told lists it leaves behind stay within their bounds (authors, names
// per list), and nothing panics.
//
//	go test -run '^$' -fuzz FuzzHave -fuzztime 30s ./node/replicate
func FuzzHave(f *testing.F) {
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	n := newFeedNodeTB(f, ctx)
	from := newActor(f)
	other := newActor(f)
	f.Add([]byte(`{"kind":"have","heads":[{"author":"` + from.id + `","seq":3,"cid":"bafyreigdmqpykrgxyaxtlafqpqhzrb7qy2rh75nldvfd4tucqmvqhkvb4y"}],"told":["` + other.id + `","not a peer"]}`))
	f.Add([]byte(`{"kind":"have","heads":[],"told":["` + other.id + `"]}`))
	f.Add([]byte(`{"kind":"have","told":[]}`))
	// Someone else's head with a list (not to be taken), a list one name
	// over the bound and heads one over theirs (refused whole).
	f.Add([]byte(`{"kind":"have","heads":[{"author":"` + other.id + `","seq":3,"cid":"bafyreigdmqpykrgxyaxtlafqpqhzrb7qy2rh75nldvfd4tucqmvqhkvb4y"}],"told":["` + from.id + `"]}`))
	var long, many strings.Builder
	for i := range maxPushPeers + 1 {
		if i > 0 {
			long.WriteString(",")
		}
		long.WriteString(`"` + other.id + `"`)
	}
	for i := range maxHeadsPerMsg + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"author":"%s","seq":%d,"cid":"bafyreigdmqpykrgxyaxtlafqpqhzrb7qy2rh75nldvfd4tucqmvqhkvb4y"}`, from.id, i+1)
	}
	f.Add([]byte(`{"kind":"have","heads":[{"author":"` + from.id + `","seq":4,"cid":"bafyreigdmqpykrgxyaxtlafqpqhzrb7qy2rh75nldvfd4tucqmvqhkvb4y"}],"told":[` + long.String() + `]}`))
	f.Add([]byte(`{"kind":"have","heads":[` + many.String() + `],"told":["` + other.id + `"]}`))
	pid, err := peer.Decode(from.id)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req syncRequest
		if decodeMsg(raw, &req) != nil {
			return
		}
		took := n.f.takeHave(pid, req)
		if took && (len(req.Heads) > maxHeadsPerMsg || len(req.Told) > maxPushPeers) {
			t.Fatalf("a push over the bounds was taken: %d heads, %d names", len(req.Heads), len(req.Told))
		}
		n.f.told.mu.Lock()
		defer n.f.told.mu.Unlock()
		if len(n.f.told.authors) > maxToldAuthors {
			t.Fatalf("%d authors' lists held, bound %d", len(n.f.told.authors), maxToldAuthors)
		}
		for a, e := range n.f.told.authors {
			if a != from.id {
				t.Fatalf("a list was taken for %s from %s", a, from.id)
			}
			if len(e.peers) > maxPushPeers {
				t.Fatalf("a list of %d names held, bound %d", len(e.peers), maxPushPeers)
			}
		}
	})
}
