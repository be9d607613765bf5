package renting

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

type recordedAccess struct {
	granted, revoked []string
	until            time.Time
	to               peer.ID
}

func (a *recordedAccess) GrantInputs(job string, p peer.ID, ins []cid.Cid, until time.Time) error {
	a.to, a.until = p, until
	for _, c := range ins {
		a.granted = append(a.granted, c.String())
	}
	return nil
}

func (a *recordedAccess) RevokeInputs(job string, p peer.ID, ins []cid.Cid) error {
	for _, c := range ins {
		a.revoked = append(a.revoked, c.String())
	}
	return nil
}

// TestLeaseGrantsItsInputs: a lease's provider is granted exactly the
// spec's input CIDs until the lease's last notice is over, and the grant
// is revoked when the run on it ends, but not when it ends because the
// node is stopping (the lease goes on: the restarted node serves it from
// node.db); a spec without inputs grants nothing.
func TestLeaseGrantsItsInputs(t *testing.T) {
	const in1, in2 = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	prov := "12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp"
	acc := &recordedAccess{}
	bg, stop := context.WithCancel(context.Background())
	defer stop()
	r := &Jobs{access: acc, log: slog.Default(), bg: bg}
	spec := &auction.JobSpec{Inputs: []auction.Input{{CID: in1, Path: "/a"}, {CID: in2, Path: "/b"}}}
	l := &auction.Lease{Provider: prov, End: time.Now().Add(time.Hour).Unix(), NoticeSec: 120}
	revoke := r.grantInputs("job-1", spec, l)
	if !slices.Equal(acc.granted, []string{in1, in2}) || acc.to.String() != prov {
		t.Fatalf("granted %v to %s, want both inputs to the provider", acc.granted, acc.to)
	}
	if want := leaseOver(l); !acc.until.Equal(want) {
		t.Errorf("granted until %s, want the lease's end plus its notice, %s", acc.until, want)
	}
	if len(acc.revoked) != 0 {
		t.Fatal("revoked before the run ended")
	}
	revoke()
	if !slices.Equal(acc.revoked, []string{in1, in2}) {
		t.Errorf("revoked %v at the run's end, want both inputs", acc.revoked)
	}
	stopping := &recordedAccess{}
	r.access = stopping
	revoke = r.grantInputs("job-3", spec, l)
	stop()
	revoke()
	if len(stopping.granted) != 2 || len(stopping.revoked) != 0 {
		t.Errorf("a run ended by the node's stop: granted %v, revoked %v; want the grant kept", stopping.granted, stopping.revoked)
	}
	none := &recordedAccess{}
	r.access = none
	r.grantInputs("job-2", &auction.JobSpec{}, l)()
	if len(none.granted)+len(none.revoked) != 0 {
		t.Errorf("a spec without inputs granted %v, revoked %v", none.granted, none.revoked)
	}
}
