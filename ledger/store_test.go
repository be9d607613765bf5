package ledger

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/crypto"
	"testing"
	"time"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ledger.db")
	s, err := OpenStore(p)
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

func TestStoreChainAndReopen(t *testing.T) {
	s, path := openTemp(t)
	k := newKey(t)
	var prev *Entry
	var ses []*SignedEntry
	for i := 0; i < 10; i++ {
		e, se, _ := mustEntry(t, k, prev, string(rune('a'+i)))
		if err := s.Append(se); err != nil {
			t.Fatal(err)
		}
		// Duplicates from gossip are harmless.
		if err := s.Append(se); err != nil {
			t.Fatal(err)
		}
		prev, ses = e, append(ses, se)
		if i == 4 { // close and reopen mid-stream: acknowledged = durable
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var err error
			if s, err = OpenStore(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer s.Close()
	h, ok, err := s.Head(prev.Author)
	if err != nil || !ok || h.Seq != 10 || !h.CID.Equals(ses[9].CID()) {
		t.Fatalf("head %+v %v %v", h, ok, err)
	}
	hs, err := s.Heads()
	if err != nil || len(hs) != 1 {
		t.Fatalf("heads %v %v", hs, err)
	}
	got, err := s.Range(prev.Author, 3, 6)
	if err != nil || len(got) != 4 || !got[0].CID().Equals(ses[2].CID()) {
		t.Fatalf("range %d %v", len(got), err)
	}
	e, _, err := s.Get(ses[7].CID())
	if err != nil || e.Seq != 8 {
		t.Fatalf("get %v %v", e, err)
	}
	if _, _, err := s.Get(ses[7].CID()); err != nil {
		t.Fatal(err)
	}
	// Gaps and wrong prev are refused.
	_, skip, _ := mustEntry(t, k, &Entry{Author: prev.Author, Seq: 11, Type: TypeProbe, Time: 1}, "x")
	if err := s.Append(skip); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("gap: %v", err)
	}
	_, fork, _ := mustEntry(t, k, &Entry{Author: prev.Author, Seq: 10, Type: TypeProbe, Time: 1}, "x")
	if err := s.Append(fork); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("wrong prev: %v", err)
	}
}

func TestEquivocation(t *testing.T) {
	s, path := openTemp(t)
	k := newKey(t)
	e1, se1, _ := mustEntry(t, k, nil, "a")
	_, se2, _ := mustEntry(t, k, e1, "b")
	_, evil, _ := mustEntry(t, k, e1, "b'")
	for _, se := range []*SignedEntry{se1, se2} {
		if err := s.Append(se); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Append(evil); !errors.Is(err, ErrEquivocation) {
		t.Fatalf("equivocation: %v", err)
	}
	s.Close()
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	proof, ok := s.Frozen(e1.Author)
	if !ok {
		t.Fatal("not frozen after reopen")
	}
	author, err := VerifyProof(proof)
	if err != nil || author != e1.Author {
		t.Fatalf("proof: %q %v", author, err)
	}
	_, next, _ := mustEntry(t, k, &Entry{Author: e1.Author, Seq: 2, Type: TypeProbe, Time: 1}, "c")
	if err := s.Append(next); !errors.Is(err, ErrFrozen) {
		t.Fatalf("append after freeze: %v", err)
	}
	// Another node learns of it from the proof alone.
	s2, _ := openTemp(t)
	defer s2.Close()
	if who, err := s2.Freeze(proof); err != nil || who != e1.Author {
		t.Fatalf("freeze from proof: %q %v", who, err)
	}
	if err := s2.Append(se1); !errors.Is(err, ErrFrozen) {
		t.Fatalf("append after gossiped proof: %v", err)
	}
	if _, err := s2.Freeze([]byte{0xa0}); !errors.Is(err, ErrNotAProof) {
		t.Fatalf("junk proof: %v", err)
	}
}

func TestVerifyProofNegative(t *testing.T) {
	k := newKey(t)
	_, _, a := mustEntry(t, k, nil, "a")
	_, _, b := mustEntry(t, k, nil, "b")
	_, _, other := mustEntry(t, newKey(t), nil, "b")
	e1, _, _ := mustEntry(t, k, nil, "a")
	_, _, seq2 := mustEntry(t, k, e1, "b")
	enc := func(p *EquivocationProof) []byte {
		w, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if _, err := VerifyProof(enc(NewEquivocationProof(a, b))); err != nil {
		t.Fatalf("valid proof refused: %v", err)
	}
	for name, p := range map[string]*EquivocationProof{
		"same entry twice":  {A: a, B: a},
		"different authors": NewEquivocationProof(a, other),
		"different seq":     NewEquivocationProof(a, seq2),
		"unordered":         {A: NewEquivocationProof(a, b).B, B: NewEquivocationProof(a, b).A},
		"garbage":           {A: []byte{1}, B: []byte{2}},
	} {
		if _, err := VerifyProof(enc(p)); !errors.Is(err, ErrNotAProof) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := VerifyProof([]byte{0xff}); !errors.Is(err, ErrNotAProof) {
		t.Errorf("junk bytes: %v", err)
	}
}

func TestAppendBatchVerdictsPerEntry(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	testBatchVerdicts(t, s, s.AppendBatch)
}

// TestAppendReplicatedVerdictsPerEntry: the group commit gives each entry
// the verdict AppendBatch gives it.
func TestAppendReplicatedVerdictsPerEntry(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	testBatchVerdicts(t, s, s.AppendReplicated)
}

// TestConcurrentReplicatedRangesAllLand: 16 peers' ranges arrive at once
// and share group commits; each feed ends at its last entry, a range with
// a gap is refused for the gap alone, and all is there after a reopen.
func TestConcurrentReplicatedRangesAllLand(t *testing.T) {
	s, path := openTemp(t)
	const feeds, per = 16, 6
	keys := make([]crypto.PrivKey, feeds)
	chains := make([][]*SignedEntry, feeds)
	for f := range feeds {
		keys[f] = newKey(t)
		var prev *Entry
		for i := range per {
			e, se, err := NewEntry(keys[f], prev, TypeOutcome, []byte{byte(f), byte(i)}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			prev, chains[f] = e, append(chains[f], se)
		}
	}
	var wg sync.WaitGroup
	verdicts := make([][]error, feeds)
	for f := range feeds {
		wg.Go(func() {
			// Feed 0's range skips its third entry.
			rng := chains[f]
			if f == 0 {
				rng = append(slices.Clone(rng[:2]), rng[3:]...)
			}
			errs, err := s.AppendReplicated(rng)
			if err != nil {
				t.Error(err)
			}
			verdicts[f] = errs
		})
	}
	wg.Wait()
	for i, e := range verdicts[0] {
		if (i >= 2) != errors.Is(e, ErrOutOfOrder) {
			t.Errorf("feed 0 entry %d: %v", i, e)
		}
	}
	for f := 1; f < feeds; f++ {
		if err := errors.Join(verdicts[f]...); err != nil {
			t.Errorf("feed %d: %v", f, err)
		}
	}
	s.Close()
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for f := range feeds {
		want := uint64(per)
		if f == 0 {
			want = 2
		}
		if h, ok, _ := s.Head(idOf(t, keys[f])); !ok || h.Seq != want {
			t.Errorf("feed %d after a reopen: head %+v, want seq %d", f, h, want)
		}
	}
}

func testBatchVerdicts(t *testing.T, s *Store, appendBatch func([]*SignedEntry) ([]error, error)) {
	t.Helper()
	k := newKey(t)
	var chain []*SignedEntry
	var prev *Entry
	for i := 0; i < 5; i++ {
		e, se, err := NewEntry(k, prev, TypeOutcome, []byte{byte(i)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		prev = e
		chain = append(chain, se)
	}
	forged := &SignedEntry{Body: chain[2].Body, Sig: append([]byte(nil), chain[1].Sig...)}
	// 1, 2, a forgery, 4 (out of order: 3 never arrived), then 3, then 4.
	errs, err := appendBatch([]*SignedEntry{chain[0], chain[1], forged, chain[3], chain[2], chain[3]})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil || errs[4] != nil || errs[5] != nil {
		t.Fatalf("valid entries refused: %v", errs)
	}
	if !errors.Is(errs[2], ErrBadSignature) {
		t.Fatalf("forgery: %v", errs[2])
	}
	if !errors.Is(errs[3], ErrOutOfOrder) {
		t.Fatalf("gap: %v", errs[3])
	}
	if h, ok, _ := s.Head(idOf(t, k)); !ok || h.Seq != 4 {
		t.Fatalf("head after the batch: %+v", h)
	}
}
