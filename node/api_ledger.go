package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/trust"
	"github.com/gleaner-net/gleaner/node/earnings"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/ipfs/go-cid"
)

// HeadView is one feed's head as this node holds it.
type HeadView struct {
	Author string `json:"author"`
	Seq    uint64 `json:"seq"`
	CID    string `json:"cid"`
	Frozen bool   `json:"frozen"`
}

// EntryView is one ledger entry; Payload is shown as JSON when it is JSON.
type EntryView struct {
	CID     string          `json:"cid"`
	Author  string          `json:"author"`
	Seq     uint64          `json:"seq"`
	Prev    string          `json:"prev,omitempty"`
	Type    string          `json:"type"`
	Time    time.Time       `json:"time"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Lease is a lease entry's co-signed lease, decoded (its payload is
	// CBOR, not JSON): who leased which GPUs when, for anyone auditing a
	// provider's feed without a CBOR decoder.
	Lease    *auction.Lease `json:"lease,omitempty"`
	LeaseCID string         `json:"lease_cid,omitempty"` // what settlements and outcomes cite
	Bytes    int            `json:"payload_bytes"`
	// Amount is the money an entry carries, and AmountIs what it is: a
	// settlement's charge, a lease's price per GPU-hour, an outcome's
	// voucher total (what the renter signed for the lease).
	Amount   *auction.Credits `json:"amount,omitempty" doc:"micro-credits (auction.Credits; 1 credit = 1000000); amount_is says of what"`
	AmountIs string           `json:"amount_is,omitempty" doc:"charged, price per GPU-hour, or voucher total"`
}

// Amount kinds (EntryView.AmountIs).
const (
	AmountCharged  = "charged"
	AmountPerHour  = "price per GPU-hour"
	AmountVouchers = "voucher total"
)

// entryAmount is the money e carries, if any.
func entryAmount(e *ledger.Entry, l *auction.Lease) (*auction.Credits, string) {
	switch e.Type {
	case ledger.TypeLease:
		if l != nil {
			return &l.Price, AmountPerHour
		}
	case ledger.TypeSettlement:
		if s, err := ledger.DecodePayload[ledger.Settlement](e.Payload); err == nil {
			paid := s.Paid()
			return &paid, AmountCharged
		}
	case ledger.TypeOutcome:
		if o, err := ledger.DecodePayload[ledger.Outcome](e.Payload); err == nil && len(o.Voucher) > 0 {
			if v, _, err := ledger.DecodeSignedVoucher(o.Voucher); err == nil {
				return &v.Total, AmountVouchers
			}
		}
	}
	return nil, ""
}

// HistoryParams select one author's feed (default: this node's).
type HistoryParams struct {
	Author string `json:"author,omitempty"`
	Limit  int    `json:"limit,omitempty" doc:"newest entries to show, default 50, at most 1000"`
}

// Validate refuses a limit it would otherwise have to change silently.
func (p HistoryParams) Validate() error {
	if p.Limit < 0 || p.Limit > 1000 {
		return fmt.Errorf("limit %d: use 1 to 1000 (0 means the default, 50)", p.Limit)
	}
	return nil
}

// CIDParams name one entry.
type CIDParams struct {
	CID string `json:"cid"`
}

// Validate checks the CID.
func (p CIDParams) Validate() error {
	if _, err := cid.Decode(p.CID); err != nil {
		return errors.New("cid: not a CID (see `gleaner ledger history`)")
	}
	return nil
}

func registerLedgerAPI(s *rpc.Server, n *Node) {
	rpc.Register(s, "ledger_heads", rpc.MethodDoc{Summary: "The head of every feed this node holds, and whether it is frozen by a fraud proof."},
		func(ctx context.Context, _ struct{}) ([]HeadView, error) {
			hs, err := n.ledger.Heads()
			if err != nil {
				return nil, err
			}
			out := make([]HeadView, 0, len(hs))
			for _, h := range hs {
				_, frozen := n.ledger.Frozen(h.Author)
				out = append(out, HeadView{Author: h.Author, Seq: h.Seq, CID: h.CID.String(), Frozen: frozen})
			}
			return out, nil
		})
	rpc.Register(s, "ledger_history", rpc.MethodDoc{Summary: "The newest entries of one feed (default: this node's own).", ParamNames: []string{"author", "limit"}},
		func(ctx context.Context, p HistoryParams) ([]EntryView, error) {
			author := p.Author
			if author == "" {
				author = n.host.ID().String()
			} else if author != n.host.ID().String() {
				// Asked for by name: replicate it even past the cap on
				// feeds of peers this node never dealt with.
				n.feeds.Follow(author)
			}
			limit := p.Limit
			if limit == 0 {
				limit = 50
			}
			h, ok, err := n.ledger.Head(author)
			if err != nil || !ok {
				return []EntryView{}, err
			}
			from := uint64(1)
			if h.Seq > uint64(limit) {
				from = h.Seq - uint64(limit) + 1
			}
			out := make([]EntryView, 0, h.Seq-from+1)
			err = n.ledger.Walk(author, from, h.Seq, func(e *ledger.Entry, se *ledger.SignedEntry) error {
				out = append(out, viewEntry(e, se))
				return nil
			})
			slices.Reverse(out) // newest first
			return out, err
		})
	rpc.Register(s, "ledger_show", rpc.MethodDoc{Summary: "One entry by CID.", ParamNames: []string{"cid"}},
		func(ctx context.Context, p CIDParams) (EntryView, error) {
			c, _ := cid.Decode(p.CID)
			e, se, err := n.ledger.Get(c)
			if errors.Is(err, ledger.ErrNotFound) {
				return EntryView{}, &rpc.Error{Code: CodeNoSuchEntry, Message: "no entry " + p.CID + " on this node"}
			}
			if err != nil {
				return EntryView{}, err
			}
			return viewEntry(e, se), nil
		})
	rpc.Register(s, "ledger_proof", rpc.MethodDoc{Summary: "A fraud proof against a peer: the equivocation that froze its feed, or else a proof that convicts it (GPU leased twice, telemetry contradicting its hardware claim, double-spent voucher). Bytes to verify offline with `gleaner ledger verify-proof`.", ParamNames: []string{"author"}},
		func(ctx context.Context, p HistoryParams) ([]byte, error) {
			proof, ok := n.ledger.Frozen(p.Author)
			if !ok && n.rep != nil {
				proof, ok = n.rep.ProofAgainst(p.Author)
			}
			if !ok {
				return nil, &rpc.Error{Code: CodeNoSuchEntry, Message: "no fraud proof for " + p.Author}
			}
			return proof, nil
		})
}

// CodeNoSuchEntry: no ledger entry or proof with that name on this node.
const CodeNoSuchEntry = -32030

func viewEntry(e *ledger.Entry, se *ledger.SignedEntry) EntryView {
	v := EntryView{CID: se.CID().String(), Author: e.Author, Seq: e.Seq, Prev: e.Prev, Type: e.Type,
		Time: time.Unix(e.Time, 0).UTC(), Bytes: len(e.Payload)}
	if json.Valid(e.Payload) {
		v.Payload = e.Payload
	}
	if e.Type == ledger.TypeLease {
		if l, sl, err := auction.DecodeSignedLease(e.Payload, true); err == nil {
			v.Lease, v.LeaseCID = l, sl.CID().String()
		}
	}
	v.Amount, v.AmountIs = entryAmount(e, v.Lease)
	return v
}

// PeerParamsRep names the peer whose reputation to show.
type PeerParamsRep struct {
	Peer string `json:"peer"`
}

// Validate checks the peer ID.
func (p PeerParamsRep) Validate() error {
	_, err := parsePeerID(p.Peer)
	return err
}

func registerRepAPI(s *rpc.Server, n *Node) {
	rpc.Register(s, "rep_show", rpc.MethodDoc{
		Summary:     "A peer's reputation as this node computes it from the replicated ledger, with its parts.",
		Description: "score is absent for a peer with no paid history. Outcomes count how its leases ended; paid_total is what its settlements prove it was paid, in micro-credits (1 credit = 1000000).",
		ParamNames:  []string{"peer"},
	}, func(ctx context.Context, p PeerParamsRep) (trust.Evidence, error) {
		n.feeds.Follow(p.Peer) // someone is weighing this peer: keep its feed
		_, ev := n.rep.Scores()
		if e, ok := ev[p.Peer]; ok {
			return *e, nil
		}
		return trust.Evidence{Peer: p.Peer, Outcomes: map[ledger.OutcomeResult]int{}}, nil
	})
}

// FaucetCredits is what every testnet node starts with: 100 credits. It is
// a testnet convention, not money: no issuer backs it, and settlement in
// real money is a separate, pluggable rail (docs/TRUST.md).
const FaucetCredits auction.Credits = 100_000_000

// BalanceResult is ledger_balance's result. Every amount is in
// micro-credits (auction.Credits: 1 credit = 1,000,000), summed exactly.
type BalanceResult struct {
	Faucet     auction.Credits            `json:"faucet" doc:"micro-credits (auction.Credits; 1 credit = 1000000)"`
	Earned     auction.Credits            `json:"earned" doc:"micro-credits: the proven settlements in this node's own feed, as a provider (each lease's last, with the voucher its renter signed for that total: what every node computes from this feed)"`
	Spent      auction.Credits            `json:"spent" doc:"micro-credits: this node's leases as a renter, each by its provider's settlement, or until that replicates the charge the provider reported, or the vouchers signed (ledger_spend)"`
	Balance    auction.Credits            `json:"balance" doc:"micro-credits: faucet + earned - spent"`
	ByDay      map[string]auction.Credits `json:"earned_by_day,omitempty" doc:"micro-credits earned per UTC day"`
	SpentFor   map[string]auction.Credits `json:"spent_by_lease,omitempty" doc:"micro-credits spent per lease CID"`
	SpentByJob map[string]auction.Credits `json:"spent_by_job,omitempty" doc:"micro-credits spent per job name (the spec's name)"`
}

func registerBalanceAPI(s *rpc.Server, n *Node) {
	registerEarningsAPI(s, n)
	rpc.Register(s, "ledger_balance", rpc.MethodDoc{Summary: "This node's testnet credits, in micro-credits (1 credit = 1000000): faucet, earnings by day, spend per lease and per job name; each lease counts what it was charged, not the prepaid part refunded, and what was just paid is in it at once."},
		func(ctx context.Context, _ struct{}) (BalanceResult, error) {
			// One walk of this node's own feed for both sides (the
			// console asks on every page). Earned needs neither the
			// scheduler nor the offered days: a running lease earns
			// nothing until it settles.
			f, err := n.readOwnFeed()
			if err != nil {
				return BalanceResult{Faucet: FaucetCredits}, err
			}
			return n.balanceOf(f), nil
		})
}

// balanceOf sums the balance from this node's own feed f and, for spend,
// its job records: earned is this node's proven settlements as a provider
// (the figure other nodes compute from its feed), spent its leases as a
// renter (spentLeases). Read from this node's own records, not the
// reputation pass alone: that is cached for 5 s and waits for the
// provider's settlement to replicate, so a balance read just after a job
// would show only part of what it cost.
func (n *Node) balanceOf(f earnings.OwnFeed) BalanceResult {
	res := BalanceResult{Faucet: FaucetCredits, ByDay: map[string]auction.Credits{}, SpentFor: map[string]auction.Credits{}, SpentByJob: map[string]auction.Credits{}}
	for _, st := range f.Settlements {
		if l := f.Leases[st.S.Lease]; l == nil || l.Provider != f.Self {
			continue
		}
		paid := st.S.Paid()
		res.Earned += paid
		res.ByDay[time.Unix(st.Time, 0).UTC().Format(earnings.DayLayout)] += paid
	}
	spent, jobs := n.spentLeases(f)
	for _, sp := range spent {
		res.Spent += sp.Amount
		res.SpentFor[sp.Lease] += sp.Amount
		res.SpentByJob[earnings.JobName(jobs[sp.L.JobID].Name, sp.L.JobID)] += sp.Amount
	}
	res.Balance = res.Faucet + res.Earned - res.Spent
	return res
}
