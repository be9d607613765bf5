package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/ledger/boltfile"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// Bucket layout. Entries are keyed by CID bytes; the seq index by
// author || big-endian seq so that Range is one cursor walk; heads by
// author; frozen authors by author, holding the proof that froze them.
var (
	bEntries = []byte("entries")
	bSeq     = []byte("seq")
	bHeads   = []byte("heads")
	bFrozen  = []byte("frozen")
)

// Store errors. ErrEquivocation is returned together with a freshly
// stored proof; the caller should gossip Frozen(author)'s proof.
var (
	ErrFrozen       = errors.New("author frozen for equivocation")
	ErrEquivocation = errors.New("equivocation detected")
	ErrOutOfOrder   = errors.New("entry does not extend the author's head")
	ErrNotFound     = errors.New("not found")
)

// Head is an author's latest stored entry.
type Head struct {
	Author string
	Seq    uint64
	CID    cid.Cid
}

// Store keeps feeds in one bbolt file. bbolt fsyncs every committed
// transaction, so Append returning nil means the entry is durable.
type Store struct {
	db    *bolt.DB
	check func(e *Entry) error // the payload's schema, by type; nil: none
}

// CheckPayloads makes every Append and AppendBatch check an entry's
// payload with check (after its signature, before storing), so that what
// is stored can later be read without checking again: the caller knows the
// payload types, the store does not. Call it once, before any append.
func (s *Store) CheckPayloads(check func(e *Entry) error) { s.check = check }

// OpenStore opens or creates the store at path. The timeout turns a second
// process holding the file lock into an error instead of a hang. The file
// is checked first (boltfile): a damaged one is a *boltfile.DamagedError,
// one line naming it and what to do, never a crash, and an existing empty
// file is refused, not recreated.
func OpenStore(path string) (*Store, error) {
	db, err := boltfile.Open(path, boltfile.Options{
		Buckets: [][]byte{bEntries, bSeq, bHeads, bFrozen},
		Timeout: 2 * time.Second,
		Advice:  "other nodes' feeds re-replicate from peers, and at start this node recovers its own feed from the peers that hold it before it appends; only what no peer holds is lost",
	})
	if err != nil {
		return nil, err
	}
	db.MaxBatchDelay = ReplicationCommitWindow
	return &Store{db: db}, nil
}

// ReplicationCommitWindow is how long entries replicated from peers wait
// to share one transaction (AppendReplicated): within it, every peer's
// range commits with one fsync instead of one each, so this node's own
// appends (its leases, on the award's path) wait behind at most one
// commit of others' entries, not a queue of them (issue 33's profile:
// half of all lock waiting was replication storing peers' entries one
// transaction each while the provider's lease append queued behind).
// 10 ms, measured (BenchmarkOwnAppendUnderReplication): 20 ms cut the own
// append's wait further but stored a fifth of the small ranges per second;
// 5 to 10 ms kept replication's rate and cut the wait 5 to 12 times.
const ReplicationCommitWindow = 10 * time.Millisecond

// Close releases the file.
func (s *Store) Close() error { return s.db.Close() }

func seqKey(author string, seq uint64) []byte {
	k := make([]byte, 0, len(author)+9)
	k = append(k, author...)
	k = append(k, 0) // peer IDs are base58, so 0 cannot occur inside one
	return binary.BigEndian.AppendUint64(k, seq)
}

// Append validates se fully (encoding, schema, signature) and stores it if
// it extends its author's feed by exactly one. An entry already stored is
// accepted again silently (gossip delivers duplicates). A different entry
// at a stored (author, seq) freezes the author: the proof is stored in the
// same transaction and ErrEquivocation is returned.
func (s *Store) Append(se *SignedEntry) error {
	errs, err := s.AppendBatch([]*SignedEntry{se})
	if err != nil {
		return err
	}
	return errs[0]
}

// AppendBatch is Append for many entries in one transaction, so one fsync
// covers them all: what replication needs when a peer sends a range. Each
// entry gets its own verdict in errs (entries are applied in order, so a
// range extends a feed step by step); err is a storage failure, after
// which nothing of the batch is stored.
func (s *Store) AppendBatch(ses []*SignedEntry) (errs []error, err error) {
	return s.appendBatch(ses, s.db.Update)
}

// AppendReplicated is AppendBatch for entries other nodes replicated to
// this one: concurrent calls (one per peer's range) share a transaction
// within ReplicationCommitWindow (bbolt's Batch, a group commit), so a
// call returns once its entries are durable, up to that window later. The
// node's own entries go through AppendBatch and Append, which commit at
// once.
func (s *Store) AppendReplicated(ses []*SignedEntry) (errs []error, err error) {
	return s.appendBatch(ses, s.db.Batch)
}

// appendBatch checks ses and stores them through commit (bbolt's Update,
// or its Batch, which may run the function more than once: it only sets
// errs, so a rerun after a failed shared batch is harmless).
func (s *Store) appendBatch(ses []*SignedEntry, commit func(func(*bolt.Tx) error) error) (errs []error, err error) {
	type checked struct {
		e    *Entry
		wire []byte
		c    cid.Cid
	}
	errs = make([]error, len(ses))
	ok := make([]*checked, len(ses))
	for i, se := range ses { // signatures outside the write lock
		wire, err := se.Marshal()
		if err != nil {
			errs[i] = err
			continue
		}
		e, dse, err := DecodeSignedEntry(wire)
		if err != nil {
			errs[i] = err
			continue
		}
		if s.check != nil {
			if err := s.check(e); err != nil {
				errs[i] = fmt.Errorf("%w: %s payload of %s seq %d: %v", ErrBadEntry, e.Type, e.Author, e.Seq, err)
				continue
			}
		}
		ok[i] = &checked{e, wire, dse.CID()}
	}
	err = commit(func(tx *bolt.Tx) error {
		for i, c := range ok {
			if c == nil {
				continue
			}
			res, err := appendTx(tx, c.e, c.wire, c.c)
			if err != nil {
				return err
			}
			errs[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// appendTx stores one verified entry; result is the entry's verdict, err a
// storage failure.
func appendTx(tx *bolt.Tx, e *Entry, wire []byte, c cid.Cid) (result, err error) {
	if tx.Bucket(bFrozen).Get([]byte(e.Author)) != nil {
		return fmt.Errorf("%w: %s", ErrFrozen, e.Author), nil
	}
	seqs, entries := tx.Bucket(bSeq), tx.Bucket(bEntries)
	if old := seqs.Get(seqKey(e.Author, e.Seq)); old != nil {
		if bytes.Equal(old, c.Bytes()) {
			return nil, nil
		}
		p := NewEquivocationProof(entries.Get(old), wire)
		if _, err := p.verify(); err != nil {
			return nil, fmt.Errorf("stored entry no longer verifies: %w", err)
		}
		pb, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		return fmt.Errorf("%w: %s at seq %d", ErrEquivocation, e.Author, e.Seq), tx.Bucket(bFrozen).Put([]byte(e.Author), pb)
	}
	hseq, hcid := uint64(0), ""
	if h := tx.Bucket(bHeads).Get([]byte(e.Author)); h != nil {
		hseq = binary.BigEndian.Uint64(h)
		hc, err := cid.Cast(h[8:])
		if err != nil {
			return nil, err
		}
		hcid = hc.String()
	}
	if e.Seq != hseq+1 || e.Prev != hcid {
		return fmt.Errorf("%w: %s seq %d prev %q, head seq %d", ErrOutOfOrder, e.Author, e.Seq, e.Prev, hseq), nil
	}
	if err := entries.Put(c.Bytes(), wire); err != nil {
		return nil, err
	}
	if err := seqs.Put(seqKey(e.Author, e.Seq), c.Bytes()); err != nil {
		return nil, err
	}
	h := binary.BigEndian.AppendUint64(nil, e.Seq)
	return nil, tx.Bucket(bHeads).Put([]byte(e.Author), append(h, c.Bytes()...))
}

// Frozen returns the proof that froze author, if any.
func (s *Store) Frozen(author string) ([]byte, bool) {
	var p []byte
	_ = s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bFrozen).Get([]byte(author)); v != nil {
			p = bytes.Clone(v)
		}
		return nil
	})
	return p, p != nil
}

// Head returns the author's head; ok is false for an unknown author.
func (s *Store) Head(author string) (h Head, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bHeads).Get([]byte(author))
		if v == nil {
			return nil
		}
		h, err = parseHead(author, v)
		ok = err == nil
		return err
	})
	return h, ok, err
}

func parseHead(author string, v []byte) (Head, error) {
	if len(v) < 9 {
		return Head{}, errors.New("corrupt head")
	}
	c, err := cid.Cast(v[8:])
	if err != nil {
		return Head{}, err
	}
	return Head{Author: author, Seq: binary.BigEndian.Uint64(v), CID: c}, nil
}

// Heads lists every author's head, for anti-entropy.
func (s *Store) Heads() ([]Head, error) {
	var hs []Head
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bHeads).ForEach(func(k, v []byte) error {
			h, err := parseHead(string(k), v)
			if err != nil {
				return err
			}
			hs = append(hs, h)
			return nil
		})
	})
	return hs, err
}

// Get returns a stored entry by CID.
func (s *Store) Get(c cid.Cid) (*Entry, *SignedEntry, error) {
	var wire []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		wire = bytes.Clone(tx.Bucket(bEntries).Get(c.Bytes()))
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if wire == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrNotFound, c)
	}
	return decodeEntryUnverified(wire)
}

// Range returns the author's entries with from <= seq <= to, in order.
func (s *Store) Range(author string, from, to uint64) ([]*SignedEntry, error) {
	var out []*SignedEntry
	err := s.Walk(author, from, to, func(_ *Entry, se *SignedEntry) error {
		out = append(out, se)
		return nil
	})
	return out, err
}

// Walk calls fn with the author's entries from..to in order, decoded but
// not verified again: Append verified every one before storing it.
func (s *Store) Walk(author string, from, to uint64, fn func(e *Entry, se *SignedEntry) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		entries := tx.Bucket(bEntries)
		cur := tx.Bucket(bSeq).Cursor()
		end := seqKey(author, to)
		for k, v := cur.Seek(seqKey(author, from)); k != nil && bytes.Compare(k, end) <= 0; k, v = cur.Next() {
			e, se, err := decodeStored(entries.Get(v))
			if err != nil {
				return err
			}
			if err := fn(e, se); err != nil {
				return err
			}
		}
		return nil
	})
}

// decodeStored reads back an entry Append stored: it was checked in full
// (canonical form, schema, signature) on the way in, so only decoding is
// left. This keeps whole-ledger scans (reputation) cheap.
func decodeStored(b []byte) (*Entry, *SignedEntry, error) {
	var s SignedEntry
	if err := decMode.Unmarshal(b, &s); err != nil {
		return nil, nil, fmt.Errorf("stored entry: %w", err)
	}
	var e Entry
	if err := decMode.Unmarshal(s.Body, &e); err != nil {
		return nil, nil, fmt.Errorf("stored entry body: %w", err)
	}
	return &e, &s, nil
}

// Freeze records a proof learned from a peer (gossiped fraud_proof) after
// verifying it offline, so that honest nodes converge on freezing an
// equivocating feed even if they never saw both entries themselves.
func (s *Store) Freeze(proof []byte) (string, error) {
	author, err := VerifyProof(proof)
	if err != nil {
		return "", err
	}
	return author, s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bFrozen)
		if b.Get([]byte(author)) != nil {
			return nil // keep the first proof; any valid one suffices
		}
		return b.Put([]byte(author), proof)
	})
}
