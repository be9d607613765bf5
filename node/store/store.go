// Package store is node.db, the node's durable state: an embedded bbolt
// database with one bucket per kind of record, values kept as JSON.
package store

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/gleaner-net/gleaner/ledger/boltfile"
	bolt "go.etcd.io/bbolt"
)

// Store is the node's durable state: an embedded bbolt database in
// <repo>/node.db. bbolt commits with fsync and a copy-on-write B+tree, so a
// crash at any moment leaves the last committed transaction intact; that is
// why state lives here and never in hand-written files.
type Store struct{ db *bolt.DB }

// Buckets. One per kind of record; names never change.
var (
	BucketOffer    = []byte("offer")    // the provider's settings and sequence number
	BucketLeases   = []byte("leases")   // provider: co-signed leases by job ID
	BucketJobs     = []byte("jobs")     // renter: job records by job ID (node/renting)
	BucketJobLogs  = []byte("joblogs")  // renter: each job's retained output (node/renting/logs.go)
	BucketPeers    = []byte("peers")    // peers this node was connected to, by peer ID (node/peers)
	BucketServices = []byte("services") // renter: service definitions by name (node/services)
	// renter: the checkpoint a waiting job resumes from, by job ID, kept
	// apart from its record (which is rewritten at every change) since it
	// may be megabytes (node/renting/wait.go)
	BucketCheckpoints = []byte("checkpoints")
	// renter: job arrays by array ID; their shards are jobs in BucketJobs
	// (node/renting/array.go)
	BucketArrays = []byte("arrays")
	// renter: gangs by gang ID; their members are jobs in BucketJobs
	// (node/renting/gang.go)
	BucketGangs = []byte("gangs")
	// data access: the roots published to every peer and the grants of
	// roots to peers, with their ends (node/node_access.go)
	BucketAccess = []byte("access")
)

// ErrNotFound is returned by Get for a missing key.
var ErrNotFound = errors.New("not found")

// Open opens (creating if needed) the database at path. The repo lock
// already excludes a second daemon; the timeout only guards against a
// foreign process holding the file. The file is checked first
// (ledger/boltfile): a damaged one is a *boltfile.DamagedError, one line
// naming it and what to do, never a crash, and an existing empty file is
// refused, not recreated.
func Open(path string) (*Store, error) {
	db, err := boltfile.Open(path, boltfile.Options{
		Buckets: [][]byte{BucketOffer, BucketLeases, BucketJobs, BucketJobLogs, BucketPeers, BucketServices, BucketCheckpoints, BucketArrays, BucketAccess, BucketGangs},
		Timeout: 2 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Get decodes the JSON value under bucket/key into v.
func (s *Store) Get(bucket []byte, key string, v any) error {
	return s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucket).Get([]byte(key))
		if raw == nil {
			return ErrNotFound
		}
		return json.Unmarshal(raw, v)
	})
}

// Update runs fn in one read-write transaction: everything fn puts is
// committed together or not at all.
func (s *Store) Update(fn func(tx *Tx) error) error {
	return s.db.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx}) })
}

// Tx is a read-write transaction.
type Tx struct{ tx *bolt.Tx }

// Get decodes bucket/key into v inside the transaction.
func (t *Tx) Get(bucket []byte, key string, v any) error {
	raw := t.tx.Bucket(bucket).Get([]byte(key))
	if raw == nil {
		return ErrNotFound
	}
	return json.Unmarshal(raw, v)
}

// Put stores v as JSON under bucket/key.
func (t *Tx) Put(bucket []byte, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return t.tx.Bucket(bucket).Put([]byte(key), raw)
}

// Delete removes bucket/key; a missing key is no error.
func (t *Tx) Delete(bucket []byte, key string) error {
	return t.tx.Bucket(bucket).Delete([]byte(key))
}

// ForEach calls fn with every key and raw JSON value of a bucket.
func (s *Store) ForEach(bucket []byte, fn func(key string, raw []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error { return fn(string(k), v) })
	})
}

// ViewBucket runs fn on bucket in one read-only transaction, for a
// package that keeps its own encoding there (node/peers).
func (s *Store) ViewBucket(bucket []byte, fn func(b *bolt.Bucket) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(tx.Bucket(bucket)) })
}

// UpdateBucket runs fn on bucket in one read-write transaction.
func (s *Store) UpdateBucket(bucket []byte, fn func(b *bolt.Bucket) error) error {
	return s.db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(bucket)) })
}
