package gangnet

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// FuzzDecodeRoster: whatever arrives, DecodeRoster neither panics nor
// accepts a roster that Validate refuses, and what it accepts encodes
// within MaxRosterBytes and decodes to the same roster.
func FuzzDecodeRoster(f *testing.F) {
	ps := testPeers(f, 2)
	good, _ := json.Marshal(Roster{Gang: "g", Size: 2, Members: []Member{{Rank: 0, Peer: ps[0], Lease: "l0"}, {Rank: 1, Peer: ps[1], Lease: "l1"}}})
	for _, seed := range []string{
		string(good),
		strings.Replace(string(good), `"rank":1`, `"rank":0`, 1),
		strings.Replace(string(good), `"size":2`, `"size":300`, 1),
		`{"gang":"g","size":1,"members":[{"rank":0,"peer":"x","lease":"l"}]}`,
		`{"gang":"g","size":1,"members":[]}`, `{"gang":"g","size":1,"members":null,"x":1}`,
		`null`, ``, `[]`, `{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRoster(b)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted an invalid roster: %v", err)
		}
		enc, err := json.Marshal(r)
		if err != nil || len(enc) > MaxRosterBytes {
			t.Fatalf("re-encode: %d bytes, %v", len(enc), err)
		}
		again, err := DecodeRoster(enc)
		if err != nil || fmt.Sprint(again) != fmt.Sprint(r) {
			t.Fatalf("round trip: %+v, %v", again, err)
		}
	})
}

// The largest roster there can be decodes within the bound, and a valid
// one decodes at all (the fuzz target's invariants are not vacuous).
func TestDecodeRosterBounds(t *testing.T) {
	ps := testPeers(t, MaxSize)
	r := Roster{Gang: strings.Repeat("g", 128), Size: MaxSize, Port: 65535}
	for i, p := range ps {
		r.Members = append(r.Members, Member{Rank: i, Peer: p, Lease: strings.Repeat("b", 120) + fmt.Sprintf("%08d", i)})
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxRosterBytes {
		t.Fatalf("the largest roster is %d bytes, over MaxRosterBytes %d", len(b), MaxRosterBytes)
	}
	if _, err := DecodeRoster(b); err != nil {
		t.Fatalf("the largest roster: %v", err)
	}
	if _, err := DecodeRoster(append(b, make([]byte, MaxRosterBytes)...)); err == nil || !strings.Contains(err.Error(), "bytes >") {
		t.Fatalf("an oversized roster: %v", err)
	}
}
