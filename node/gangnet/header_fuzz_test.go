package gangnet

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzGangHeader: whatever a peer sends, the decoder neither panics nor
// accepts a header outside its patterns and ranges, and what it accepts
// encodes within the frame limit and decodes to itself. The seeds run as
// a normal test; `go test -fuzz FuzzGangHeader ./node/gangnet` explores.
func FuzzGangHeader(f *testing.F) {
	for _, seed := range []string{
		`{"gang":"g1","from":0,"to":1,"lease":"bafyabc"}`,
		`{"gang":"g1","from":1,"to":1,"lease":"x"}`,
		`{"gang":"g1","from":-1,"to":1,"lease":"x"}`,
		`{"gang":"g1","from":0,"to":256,"lease":"x"}`,
		`{"gang":"g1","from":0,"to":1,"lease":""}`,
		`{"gang":"g1","from":0,"to":1,"lease":"a/b"}`,
		`{"gang":"../g","from":0,"to":1,"lease":"x"}`,
		`{"gang":"g1","from":0,"to":1,"lease":"x","extra":1}`,
		`{"gang":"g1","from":0,"to":1,"lease":"x"} {}`,
		`{"gang":"g1","from":1e3,"to":1,"lease":"x"}`,
		`{"gang":"g1","from":"0","to":1,"lease":"x"}`,
		`null`, `[]`, ``, `{}`,
		`{"gang":"` + strings.Repeat("a", 600) + `","from":0,"to":1,"lease":"x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil {
			return
		}
		if !GangPattern.MatchString(h.Gang) || !LeasePattern.MatchString(h.Lease) ||
			h.From < 0 || h.To < 0 || h.From >= MaxSize || h.To >= MaxSize || h.From == h.To {
			t.Fatalf("accepted %+v", h)
		}
		enc, err := json.Marshal(h)
		if err != nil || len(enc) > MaxHeader {
			t.Fatalf("re-encode %+v: %d bytes, %v", h, len(enc), err)
		}
		again, err := DecodeHeader(enc)
		if err != nil || again != h {
			t.Fatalf("round trip %q: %+v, %v", enc, again, err)
		}
	})
}

// The fuzz target's invariants hold vacuously if nothing decodes: a valid
// header must.
func TestDecodeHeaderAcceptsValid(t *testing.T) {
	want := Header{Gang: "g1", From: 0, To: 255, Lease: "bafyabc"}
	b, _ := json.Marshal(want)
	if got, err := DecodeHeader(b); err != nil || got != want {
		t.Fatalf("%s: %+v, %v", b, got, err)
	}
}
