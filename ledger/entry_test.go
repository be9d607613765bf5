package ledger

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
)

var t0 = time.Unix(1_800_000_000, 0)

func newKey(t testing.TB) crypto.PrivKey {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustEntry(t testing.TB, k crypto.PrivKey, prev *Entry, payload string) (*Entry, *SignedEntry, []byte) {
	t.Helper()
	e, se, err := NewEntry(k, prev, TypeTelemetryDigest, []byte(payload), t0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := se.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return e, se, w
}

func TestEntryRoundTrip(t *testing.T) {
	k := newKey(t)
	e1, se1, w1 := mustEntry(t, k, nil, "a")
	e2, _, w2 := mustEntry(t, k, e1, "b")
	if e2.Seq != 2 || e2.Prev != se1.CID().String() || e2.Prev != e1.CID().String() {
		t.Fatalf("chain: %+v", e2)
	}
	for _, w := range [][]byte{w1, w2} {
		if _, _, err := DecodeSignedEntry(w); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEntryRejects(t *testing.T) {
	k := newKey(t)
	if _, _, err := NewEntry(k, nil, "gossip", nil, t0); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("unknown type: %v", err)
	}
	if _, _, err := NewEntry(k, nil, TypeRating, make([]byte, MaxEntryBytes), t0); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("oversized: %v", err)
	}
	e1, _, _ := mustEntry(t, k, nil, "a")
	if _, _, err := NewEntry(newKey(t), e1, TypeRating, nil, t0); !errors.Is(err, ErrBadEntry) {
		t.Fatalf("foreign prev: %v", err)
	}
	// A body signed by someone else than its author.
	_, se, _ := mustEntry(t, k, nil, "a")
	_, other, _ := mustEntry(t, newKey(t), nil, "a")
	se.Sig = other.Sig
	w, _ := se.Marshal()
	if _, _, err := DecodeSignedEntry(w); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("forged: %v", err)
	}
	// Non-canonical: a definite-length map re-encoded with a longer length
	// prefix must not decode, or one entry would have two wire forms.
	_, _, w = mustEntry(t, k, nil, "a")
	if w[0] != 0xa2 {
		t.Fatalf("unexpected envelope head %x", w[0])
	}
	nc := append([]byte{0xb8, 2}, w[1:]...)
	if _, _, err := DecodeSignedEntry(nc); !errors.Is(err, ErrBadEncoding) {
		t.Fatalf("non-canonical: %v", err)
	}
}

func FuzzDecodeSignedEntry(f *testing.F) {
	k := newKey(f)
	e1, _, w1 := mustEntry(f, k, nil, "seed")
	_, _, w2 := mustEntry(f, k, e1, "")
	f.Add(w1)
	f.Add(w2)
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, se, err := DecodeSignedEntry(b)
		if err != nil {
			return
		}
		// Whatever decodes must be valid and have exactly this wire form.
		if err := e.Validate(); err != nil {
			t.Fatal(err)
		}
		w, err := se.Marshal()
		if err != nil || string(w) != string(b) {
			t.Fatalf("accepted bytes are not canonical")
		}
	})
}
