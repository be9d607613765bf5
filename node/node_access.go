package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/node/data"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Who may fetch what from this node (docs/DATA.md, "Who sees what").
//
// Data is private by default: what the owner imports (data add, a job's
// src: inputs), what a provider fetched for a job and the outputs it
// keeps are served to no peer, nor announced in the DHT or the offer,
// unless published (data add --public, data pin --public) or granted: a
// renter grants its lease's provider the job's inputs until the lease is
// over (plus inputGrantGrace), and a provider grants the renter its job's
// sealed outputs until their retention ends. Both kinds of record live in
// node.db's access bucket, so a restart serves exactly what it served
// before, and a grant that ended meanwhile is gone.

// inputGrantGrace is how long after its lease's last notice a provider
// may still fetch the job's inputs: clocks differ, and a fetch under way
// at the end is not cut mid-block.
const inputGrantGrace = 2 * time.Minute

// accessRecord is one record of the access bucket: a public root (key
// "public/<cid>", Until zero) or a grant (key "grant/<peer>/<cid>").
type accessRecord struct {
	Until time.Time `json:"until,omitempty"`
	Job   string    `json:"job,omitempty"` // the lease's job, for the log
}

func publicKey(c cid.Cid) string           { return "public/" + c.String() }
func grantKey(p peer.ID, c cid.Cid) string { return "grant/" + p.String() + "/" + c.String() }

// startAccess loads the access records into a new data.Access.
func (n *Node) startAccess() error {
	n.access = data.NewAccess(n.data, 0)
	n.access.OnRefuse = func(p peer.ID, c cid.Cid) {
		n.log.Debug("data: want refused: not public and not granted to the peer", "peer", p, "cid", c)
	}
	n.onClose(func(context.Context) error { n.access.Close(); return nil })
	return loadAccess(n.bg, n.store, n.access, n.log)
}

// loadAccess applies the access records of st to acc; grants that ended
// while the node was down, and records that do not parse, are deleted.
func loadAccess(ctx context.Context, st *store.Store, acc *data.Access, log *slog.Logger) error {
	now := time.Now()
	var ended []string
	err := st.ForEach(store.BucketAccess, func(key string, raw []byte) error {
		var r accessRecord
		if json.Unmarshal(raw, &r) != nil {
			ended = append(ended, key) // unreadable: grants nothing
			return nil
		}
		parts := strings.Split(key, "/")
		switch {
		case len(parts) == 2 && parts[0] == "public":
			c, err := cid.Decode(parts[1])
			if err == nil {
				err = acc.Publish(ctx, c)
			}
			if err != nil {
				log.Warn("data: a public root is not served", "cid", parts[1], "err", err)
			}
		case len(parts) == 3 && parts[0] == "grant":
			p, perr := peer.Decode(parts[1])
			c, cerr := cid.Decode(parts[2])
			if perr != nil || cerr != nil || !now.Before(r.Until) {
				ended = append(ended, key)
				return nil
			}
			if err := acc.Grant(ctx, p, c, r.Until); err != nil {
				log.Warn("data: a grant is not served", "peer", p, "cid", c, "err", err)
			}
		default:
			ended = append(ended, key)
		}
		return nil
	})
	if err != nil || len(ended) == 0 {
		return err
	}
	return st.Update(func(tx *store.Tx) error {
		for _, k := range ended {
			if err := tx.Delete(store.BucketAccess, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// publishData serves c to every peer and announces it, from now on and
// after restarts.
func (n *Node) publishData(ctx context.Context, c cid.Cid) error {
	if err := n.access.Publish(ctx, c); err != nil {
		return err
	}
	if err := n.store.Update(func(tx *store.Tx) error { return tx.Put(store.BucketAccess, publicKey(c), accessRecord{}) }); err != nil {
		return err
	}
	n.provideData(c)
	return nil
}

// unpublishData makes c private again.
func (n *Node) unpublishData(c cid.Cid) error {
	n.access.Unpublish(c)
	return n.store.Update(func(tx *store.Tx) error { return tx.Delete(store.BucketAccess, publicKey(c)) })
}

// grantData lets p fetch each of roots until until, recorded so that a
// restart keeps serving it.
func (n *Node) grantData(p peer.ID, roots []cid.Cid, until time.Time, job string) error {
	return grantAccess(n.bg, n.store, n.access, p, roots, until, job)
}

func grantAccess(ctx context.Context, st *store.Store, acc *data.Access, p peer.ID, roots []cid.Cid, until time.Time, job string) error {
	for _, c := range roots {
		if err := acc.Grant(ctx, p, c, until); err != nil {
			return err
		}
	}
	return st.Update(func(tx *store.Tx) error {
		for _, c := range roots {
			if err := tx.Put(store.BucketAccess, grantKey(p, c), accessRecord{Until: until, Job: job}); err != nil {
				return err
			}
		}
		return nil
	})
}

// revokeData ends p's grants of roots.
func (n *Node) revokeData(p peer.ID, roots []cid.Cid) error {
	return revokeAccess(n.store, n.access, p, roots)
}

func revokeAccess(st *store.Store, acc *data.Access, p peer.ID, roots []cid.Cid) error {
	for _, c := range roots {
		acc.Revoke(p, c)
	}
	return st.Update(func(tx *store.Tx) error {
		for _, c := range roots {
			if err := tx.Delete(store.BucketAccess, grantKey(p, c)); err != nil {
				return err
			}
		}
		return nil
	})
}

// dataAccess is the renter's jobs' side of access (renting.Deps.Access):
// a lease's provider gets the job's inputs for the lease.
type dataAccess struct{ n *Node }

func (d dataAccess) GrantInputs(job string, provider peer.ID, inputs []cid.Cid, until time.Time) error {
	return d.n.grantData(provider, inputs, until.Add(inputGrantGrace), job)
}

func (d dataAccess) RevokeInputs(job string, provider peer.ID, inputs []cid.Cid) error {
	return d.n.revokeData(provider, inputs)
}
