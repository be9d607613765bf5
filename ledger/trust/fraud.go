package trust

import (
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

// fraudScan collects, as the ledger is folded in, what the objective
// fraud checks need: every provider's latest hardware claim, every
// co-signed lease, where in the provider's own feed each lease was signed
// and settled, when each renter recorded its lease's end, and every
// journaled fraud proof.
type fraudScan struct {
	claims map[string]ClaimRef         // author -> latest claim
	leases map[string]*leaseRef        // lease CID -> lease
	proofs map[string][]ledger.Verdict // accused -> valid journaled proofs that convict by themselves
	raw    map[string][]byte           // accused -> one proof's bytes
	seen   map[string]bool             // proof bytes already journaled, by anyone
}

// doubleLease is one conflict found: the proof, and the two renters (the
// parties with standing to journal it).
type doubleLease struct {
	proof   []byte
	renters [2]string
}

// ClaimRef is a provider's latest hardware claim and the signed entry
// that states it.
type ClaimRef struct {
	Raw   []byte // the SignedEntry, for a contradiction proof
	Seq   uint64
	Time  int64 // unix seconds: samples before it are not held against it
	Claim attest.Claim
}

// leaseRef is a lease and what its parties' feeds say of it.
type leaseRef struct {
	raw   []byte
	lease *auction.Lease
	cid   string
	// signedAt and settledAt are the seq of the provider's own lease and
	// settlement entries (0: none): the provider's feed is a hash chain,
	// so their order cannot be rewritten without equivocating.
	signedAt, settledAt uint64
	// renterEnd is when the renter's outcome says the lease ended (0:
	// not yet). Only the lease's own renter's word counts.
	renterEnd int64
	ends      []endClaim // not yet resolved against the lease's parties
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
	return &fraudScan{claims: map[string]ClaimRef{}, leases: map[string]*leaseRef{},
		proofs: map[string][]ledger.Verdict{}, raw: map[string][]byte{}, seen: map[string]bool{}}
}

// add looks at one entry of an unfrozen feed.
func (f *fraudScan) add(e *ledger.Entry, se *ledger.SignedEntry) {
	switch e.Type {
	case ledger.TypeHardwareClaim:
		c, err := attest.DecodeClaim(e.Payload)
		if err == nil && e.Seq >= f.claims[e.Author].Seq {
			raw, _ := se.Marshal()
			f.claims[e.Author] = ClaimRef{Raw: raw, Seq: e.Seq, Time: e.Time, Claim: c}
		}
	case ledger.TypeLease:
		// Fields only: stored leases were checked in full on the way in
		// (ledger.CheckPayload), and the few that decide something are checked
		// again where they do (VerifyDoubleLease, verifiedLease).
		l, sl, err := auction.ReadLease(e.Payload)
		if err != nil || (e.Author != l.Provider && e.Author != l.Renter) {
			return
		}
		ref := f.lease(sl.CID().String())
		ref.raw, ref.lease = e.Payload, l
		if e.Author == l.Provider && ref.signedAt == 0 {
			ref.signedAt = e.Seq
		}
	case ledger.TypeFraudProof:
		v, err := ledger.VerifyAnyProof(e.Payload)
		if err == nil && !f.seen[string(e.Payload)] && v.Kind != ledger.ProofDoubleLease {
			// A double-lease proof shows two signed leases, not that the
			// first had not ended: every node judges that from the feeds
			// itself (doubleLeases), so a journaled one convicts nobody.
			f.proofs[v.Author] = append(f.proofs[v.Author], v)
			if f.raw[v.Author] == nil {
				f.raw[v.Author] = e.Payload
			}
		}
		f.seen[string(e.Payload)] = true
	}
}

// ended records a settlement or outcome (decoded once, by the fold) that
// names lease. Who wrote it is checked once the lease is known
// (resolveEnds): a stranger's word that a lease ended excuses nothing.
func (f *fraudScan) ended(lease string, e *ledger.Entry) {
	if lease == "" {
		return
	}
	ref := f.lease(lease)
	if e.Type == ledger.TypeSettlement {
		ref.ends = append(ref.ends, endClaim{author: e.Author, seq: e.Seq, settlement: true})
	} else {
		ref.ends = append(ref.ends, endClaim{author: e.Author, time: e.Time})
	}
}

// endClaim is a settlement or outcome naming a lease, before we know
// whether its author is a party to the lease.
type endClaim struct {
	author     string
	seq        uint64
	time       int64
	settlement bool
}

func (f *fraudScan) lease(cid string) *leaseRef {
	ref, ok := f.leases[cid]
	if !ok {
		ref = &leaseRef{cid: cid}
		f.leases[cid] = ref
	}
	return ref
}

// resolveEnds keeps, of the end claims, the provider's first settlement
// and the renter's earliest outcome.
func (ref *leaseRef) resolveEnds() {
	for _, c := range ref.ends {
		switch {
		case c.settlement && c.author == ref.lease.Provider:
			if ref.settledAt == 0 || c.seq < ref.settledAt {
				ref.settledAt = c.seq
			}
		case !c.settlement && c.author == ref.lease.Renter:
			if ref.renterEnd == 0 || c.time < ref.renterEnd {
				ref.renterEnd = c.time
			}
		}
	}
	ref.ends = nil
}

// doubleLeases finds, per provider, the first pair of exclusive (gold or
// silver) leases in which it gave one GPU to two jobs at once. It walks
// each GPU's leases in the order the provider signed them: a lease is open
// from its signing until the provider settles it (in its own feed, before
// the next signing), its renter records its end, or its window closes.
// Signing a lease whose window overlaps a lease still open on that GPU is
// the fault. A lease the provider never journaled is compared by time
// with every other, and only its renter's word can close it. Honest
// providers hold at most one open lease per GPU, so this is linear.
func (f *fraudScan) doubleLeases() []doubleLease {
	byGPU := map[string][]*leaseRef{} // provider/GPU -> exclusive leases
	for _, ref := range f.leases {
		if ref.lease == nil {
			continue // only end claims seen so far
		}
		ref.resolveEnds()
		if ref.lease.Tier == auction.Bronze {
			continue
		}
		for _, g := range ref.lease.GPUUUIDHash {
			k := ref.lease.Provider + "/" + g
			byGPU[k] = append(byGPU[k], ref)
		}
	}
	var out []doubleLease
	convicted := map[string]bool{}
	for _, group := range byGPU {
		if convicted[group[0].lease.Provider] {
			continue
		}
		if a, b, ok := firstConflict(group); ok {
			convicted[a.lease.Provider] = true
			if p, err := ledger.NewDoubleLeaseProof(a.raw, b.raw).Marshal(); err == nil {
				out = append(out, doubleLease{p, [2]string{a.lease.Renter, b.lease.Renter}})
			}
		}
	}
	return out
}

func firstConflict(group []*leaseRef) (a, b *leaseRef, ok bool) {
	var signed, hidden []*leaseRef
	for _, r := range group {
		if r.signedAt > 0 {
			signed = append(signed, r)
		} else {
			hidden = append(hidden, r)
		}
	}
	sort.Slice(signed, func(i, j int) bool { return signed[i].signedAt < signed[j].signedAt })
	var open []*leaseRef
	for _, nb := range signed {
		still := open[:0]
		for _, oa := range open {
			closed := (oa.settledAt > 0 && oa.settledAt < nb.signedAt) || oa.lease.End <= nb.lease.Start ||
				(oa.renterEnd > 0 && oa.renterEnd <= nb.lease.Start+releaseSkew)
			if !closed {
				still = append(still, oa)
			}
		}
		open = still
		for _, oa := range open {
			if _, c := ledger.LeasesConflict(oa.lease, nb.lease); c {
				return oa, nb, true
			}
		}
		open = append(open, nb)
	}
	for _, h := range hidden {
		for _, o := range group {
			if o == h {
				continue
			}
			first, second := o, h
			if h.lease.Start < o.lease.Start {
				first, second = h, o
			}
			excused := first.renterEnd > 0 && first.renterEnd <= second.lease.Start+releaseSkew
			if _, c := ledger.LeasesConflict(first.lease, second.lease); c && !excused {
				return first, second, true
			}
		}
	}
	return nil, nil, false
}
