package node

import (
	"encoding/json"
	"sort"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
)

// releaseSkew is how long after a lease's recorded end the next lease of
// its GPU may start and still count as the start: clocks differ, and the
// provider re-offers a GPU the moment a job ends, slightly before either
// side has journaled that end.
const releaseSkew = 60

// fraudScan collects, during one pass over the replicated ledger, what the
// objective fraud checks need: every provider's latest hardware claim,
// every co-signed lease, when each lease was recorded as ended, and every
// journaled fraud proof.
type fraudScan struct {
	claims map[string]claimRef         // author -> latest claim
	leases map[string]*leaseRef        // lease CID -> lease
	ended  map[string]int64            // lease CID -> earliest recorded end
	proofs map[string][]ledger.Verdict // accused -> valid journaled proofs
	raw    map[string][]byte           // accused -> one proof's bytes
	seen   map[string]bool             // proof bytes already journaled, by anyone
}

// doubleLease is one conflict found: the proof, and the two renters (the
// parties with standing to journal it).
type doubleLease struct {
	proof   []byte
	renters [2]string
}

type claimRef struct {
	raw   []byte // the SignedEntry, for a contradiction proof
	seq   uint64
	claim attest.Claim
}

type leaseRef struct {
	raw   []byte
	lease *auction.Lease
}

// verifiedLease is the lease named cid if both parties really signed it.
func (f *fraudScan) verifiedLease(cid string) (*auction.Lease, bool) {
	ref, ok := f.leases[cid]
	if !ok {
		return nil, false
	}
	l, _, err := auction.DecodeSignedLease(ref.raw, true)
	return l, err == nil
}

func newFraudScan() *fraudScan {
	return &fraudScan{claims: map[string]claimRef{}, leases: map[string]*leaseRef{},
		ended: map[string]int64{}, proofs: map[string][]ledger.Verdict{}, raw: map[string][]byte{}, seen: map[string]bool{}}
}

// add looks at one entry of an unfrozen feed.
func (f *fraudScan) add(e *ledger.Entry, se *ledger.SignedEntry) {
	switch e.Type {
	case ledger.TypeHardwareClaim:
		c, err := attest.DecodeClaim(e.Payload)
		if err == nil && e.Seq >= f.claims[e.Author].seq {
			raw, _ := se.Marshal()
			f.claims[e.Author] = claimRef{raw: raw, seq: e.Seq, claim: c}
		}
	case ledger.TypeLease:
		// Fields only: the signatures of the few leases that decide
		// something are checked where they do (VerifyDoubleLease,
		// verifiedLease); verifying 100k leases every pass would not scale.
		l, sl, err := auction.DecodeLeaseUnverified(e.Payload)
		if err == nil && (e.Author == l.Provider || e.Author == l.Renter) {
			f.leases[sl.CID().String()] = &leaseRef{raw: e.Payload, lease: l}
		}
	case ledger.TypeSettlement, ledger.TypeOutcome:
		var ref struct {
			Lease string `json:"lease"`
		}
		if json.Unmarshal(e.Payload, &ref) == nil && ref.Lease != "" {
			if t, ok := f.ended[ref.Lease]; !ok || e.Time < t {
				f.ended[ref.Lease] = e.Time
			}
		}
	case ledger.TypeFraudProof:
		if v, err := ledger.VerifyAnyProof(e.Payload); err == nil && !f.seen[string(e.Payload)] {
			f.proofs[v.Author] = append(f.proofs[v.Author], v)
			if f.raw[v.Author] == nil {
				f.raw[v.Author] = e.Payload
			}
		}
		f.seen[string(e.Payload)] = true
	}
}

// doubleLeases finds every pair of exclusive leases in which one provider
// gave one GPU to two jobs at once, excusing a first lease that either
// party recorded as ended before the second began (a job that finished
// or was cancelled early frees its GPU). It returns each conflict's proof.
func (f *fraudScan) doubleLeases() []doubleLease {
	type use struct {
		cid string
		ref *leaseRef
	}
	byGPU := map[string][]use{} // provider + GPU -> exclusive leases
	for cid, ref := range f.leases {
		if ref.lease.Tier == auction.Bronze {
			continue
		}
		for _, g := range ref.lease.GPUUUIDHash {
			k := ref.lease.Provider + "/" + g
			byGPU[k] = append(byGPU[k], use{cid, ref})
		}
	}
	var out []doubleLease
	done := map[[2]string]bool{}
	for _, uses := range byGPU {
		sort.Slice(uses, func(i, j int) bool { return uses[i].ref.lease.Start < uses[j].ref.lease.Start })
		for i := range uses {
			a := uses[i]
			end := a.ref.lease.End
			if t, ok := f.ended[a.cid]; ok && t < end {
				end = t
			}
			for _, b := range uses[i+1:] {
				if b.ref.lease.Start+releaseSkew >= end {
					break // sorted by start: no later lease overlaps a either
				}
				if _, conflict := ledger.LeasesConflict(a.ref.lease, b.ref.lease); !conflict || done[[2]string{a.cid, b.cid}] {
					continue
				}
				done[[2]string{a.cid, b.cid}] = true
				if p, err := ledger.NewDoubleLeaseProof(a.ref.raw, b.ref.raw).Marshal(); err == nil {
					out = append(out, doubleLease{p, [2]string{a.ref.lease.Renter, b.ref.lease.Renter}})
				}
			}
		}
	}
	return out
}
