package ledger

import (
	"bytes"
	"fmt"
	"sync"
)

type laneKey struct {
	lease string
	lane  uint32
}

type laneState struct {
	best  *Voucher
	wire  []byte            // best's wire bytes
	seen  map[uint64][]byte // wire bytes of every accepted voucher by nonce
	proof *DoubleSpendProof // set once the renter double-spent on this lane
}

// VoucherBook is a provider's (or auditor's) view of the vouchers it has
// received: the highest total per (lease, lane) is what it can settle.
// It is safe for concurrent use.
type VoucherBook struct {
	mu    sync.Mutex
	lanes map[laneKey]*laneState
}

// NewVoucherBook returns an empty book.
func NewVoucherBook() *VoucherBook { return &VoucherBook{lanes: map[laneKey]*laneState{}} }

// Accept verifies sv and records it. A voucher already seen is accepted
// again silently. A different voucher for a nonce already seen returns a
// DoubleSpendProof (and ErrDoubleSpend); the lane keeps its best voucher,
// since the earlier promise still binds the renter. A higher nonce must
// not lower the total (ErrRegress); a nonce below the best is ErrStale,
// as it could never be worth settling.
func (vb *VoucherBook) Accept(sv *SignedVoucher) (*DoubleSpendProof, error) {
	wire, err := sv.Marshal()
	if err != nil {
		return nil, err
	}
	v, _, err := DecodeSignedVoucher(wire)
	if err != nil {
		return nil, err
	}
	vb.mu.Lock()
	defer vb.mu.Unlock()
	k := laneKey{v.Lease, v.Lane}
	st := vb.lanes[k]
	if st == nil {
		vb.lanes[k] = &laneState{best: v, wire: wire, seen: map[uint64][]byte{v.Nonce: wire}}
		return nil, nil
	}
	if st.best.Renter != v.Renter || st.best.Provider != v.Provider {
		// Anyone can sign a voucher naming any lease; only the lease's own
		// renter's promises count, and the first one fixed who that is.
		return nil, fmt.Errorf("%w: lane belongs to renter %s, provider %s", ErrBadVoucher, st.best.Renter, st.best.Provider)
	}
	if old, ok := st.seen[v.Nonce]; ok {
		if bytes.Equal(old, wire) {
			return nil, nil
		}
		p := newDoubleSpendProof(old, wire)
		if _, err := p.verify(); err != nil {
			// Same body, different signature bytes: not a conflict.
			return nil, nil
		}
		st.proof = p
		return p, fmt.Errorf("%w: renter %s, lease %s lane %d nonce %d", ErrDoubleSpend, v.Renter, v.Lease, v.Lane, v.Nonce)
	}
	if v.Nonce < st.best.Nonce {
		return nil, fmt.Errorf("%w: nonce %d < %d", ErrStale, v.Nonce, st.best.Nonce)
	}
	if v.Total < st.best.Total {
		return nil, fmt.Errorf("%w: total %d at nonce %d, %d at nonce %d", ErrRegress, v.Total, v.Nonce, st.best.Total, st.best.Nonce)
	}
	st.best, st.wire = v, wire
	st.seen[v.Nonce] = wire
	return nil, nil
}

// Best returns the highest voucher on a lane and its wire bytes.
func (vb *VoucherBook) Best(lease string, lane uint32) (*Voucher, []byte, bool) {
	vb.mu.Lock()
	defer vb.mu.Unlock()
	st := vb.lanes[laneKey{lease, lane}]
	if st == nil {
		return nil, nil, false
	}
	return st.best, st.wire, true
}

// DoubleSpent returns the proof recorded for a lane, if any.
func (vb *VoucherBook) DoubleSpent(lease string, lane uint32) (*DoubleSpendProof, bool) {
	vb.mu.Lock()
	defer vb.mu.Unlock()
	st := vb.lanes[laneKey{lease, lane}]
	if st == nil || st.proof == nil {
		return nil, false
	}
	return st.proof, true
}
