package data

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"time"

	"github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	"github.com/ipfs/go-datastore/query"
)

// A pin's value is empty for a pin that lasts until unpinned, or eight
// bytes (big-endian Unix seconds) for one that lapses then: a job's
// outputs, kept on the provider for the renter's retention window.

// AddTarUntil is AddTar with a pin that lapses at until, unless the root
// was pinned to last before.
func (s *Store) AddTarUntil(ctx context.Context, r io.Reader, lim ExportLimits, until time.Time) (TarResult, error) {
	return s.addTar(ctx, r, lim, func(ctx context.Context, root cid.Cid) error {
		key := pinPrefix.ChildString(root.String())
		if v, err := s.db.Get(ctx, key); err == nil && len(v) == 0 {
			return nil // pinned to last already
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(until.Unix()))
		return s.db.Put(ctx, key, b[:])
	})
}

// PinExpiry is when the pin of c lapses; zero for a lasting pin, ok false
// when c is not pinned.
func (s *Store) PinExpiry(ctx context.Context, c cid.Cid) (until time.Time, ok bool, err error) {
	v, err := s.db.Get(ctx, pinPrefix.ChildString(c.String()))
	if errors.Is(err, ds.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil || len(v) != 8 {
		return time.Time{}, err == nil, err
	}
	return time.Unix(int64(binary.BigEndian.Uint64(v)), 0), true, nil
}

// ExpirePins unpins every root whose pin lapsed by now and returns them;
// their blocks go at the next GC unless another pin holds them.
func (s *Store) ExpirePins(ctx context.Context, now time.Time) ([]cid.Cid, error) {
	res, err := s.db.Query(ctx, query.Query{Prefix: pinPrefix.String()})
	if err != nil {
		return nil, err
	}
	var lapsed []ds.Key
	for r := range res.Next() {
		if r.Error != nil {
			res.Close()
			return nil, r.Error
		}
		if len(r.Value) == 8 && int64(binary.BigEndian.Uint64(r.Value)) <= now.Unix() {
			lapsed = append(lapsed, ds.RawKey(r.Key))
		}
	}
	res.Close()
	var out []cid.Cid
	for _, k := range lapsed {
		c, err := cid.Decode(k.BaseNamespace())
		if err != nil {
			continue
		}
		if err := s.db.Delete(ctx, k); err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// LastingPins lists the roots whose pin does not lapse (the owner's pins,
// a node's fetched inputs), in one pass over the pins.
func (s *Store) LastingPins(ctx context.Context) ([]cid.Cid, error) {
	res, err := s.db.Query(ctx, query.Query{Prefix: pinPrefix.String()})
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var out []cid.Cid
	for r := range res.Next() {
		if r.Error != nil {
			return nil, r.Error
		}
		if len(r.Value) != 0 {
			continue // lapses: a renter's outputs
		}
		if c, err := cid.Decode(ds.RawKey(r.Key).BaseNamespace()); err == nil {
			out = append(out, c)
		}
	}
	return out, nil
}
