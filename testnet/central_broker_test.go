package testnet

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A central broker: the baseline the market's placement latency is
// measured against (issue 33), over the same libp2p hosts. One ordinary
// node of a cluster acts as the broker; renter nodes send it a job on
// brokerProto and get back a co-signed lease. The broker picks the
// provider itself, from the offer book its node gathered and its own
// count of the GPUs it has leased (a central scheduler knows every
// allocation because it makes them): the cheapest feasible offer with
// enough GPUs free, no quote round to many. It then obtains the lease
// through the providers' own protocols, a quote (/auction/1) to that one
// provider and the award (/lease/1), one placement at a time, so that it
// never races itself for a provider's GPUs; a decline or a refusal sends
// it to the next offer in its order.
//
// A provider co-signs only a lease whose renter is the peer that quoted
// and awarded it, and runs a job only for that renter, so the broker
// awards in its own name and runs the job itself (dispatch, after the
// renter has its answer): the renter's node receives a lease that names
// the broker, and verifies it. For this baseline that is what counts:
// placement latency over the same wire, with the same jobs running and
// draining as the market's. It is a benchmark's tool, not a product
// feature, hence test code.

// brokerProto is the renter -> broker request: one brokerRequest, one
// brokerReply, on a fresh stream (scoped by p2p to /gleaner/N/).
const brokerProto = "bench-broker/1"

// brokerFrame bounds both messages: a spec of at most
// auction.MaxJobSpecBytes in base64, or a lease of at most
// auction.MaxLeaseBytes in base64 with an error's words.
const brokerFrame = wire.MaxRequestFrame

// The broker's deadlines, those of a renter's round (auction/renter).
const (
	brokerQuoteWait = renter.DefaultQuoteDeadline
	brokerAwardWait = renter.DefaultAwardDeadline
	brokerServeWait = 30 * time.Second // one request, queued behind others included
	brokerRunWait   = 2 * time.Minute  // a dispatched job's run, to its exit
	brokerBilling   = 300              // seconds: renting's default billing interval
)

type brokerRequest struct {
	Spec []byte `json:"spec"` // the job spec's YAML, as a provider receives it
	// Durable asks the broker to record the job when it arrives and its
	// lease once placed, each committed (bbolt, fsync) before it goes on,
	// as a central scheduler that survives its own restart must (Bacalhau's
	// orchestrator keeps its jobs and executions in BoltDB, HTCondor's
	// schedd logs its job queue): the two writes a market renter makes to
	// its node.db on the same path (the job record at job_submit, the
	// lease before the leased state). Without it the broker writes nothing.
	Durable bool `json:"durable,omitempty"`
}

// brokerRecord is what a durable broker keeps of a job, in its own
// node.db-like store (node/store: bbolt, fsync on commit).
type brokerRecord struct {
	Spec     []byte    `json:"spec"`
	Received time.Time `json:"received"`
	Lease    []byte    `json:"lease,omitempty"`
}

type brokerReply struct {
	Lease []byte `json:"lease,omitempty"` // co-signed, naming the broker as renter
	Error string `json:"error,omitempty"`
}

// centralBroker is the broker's side: the stream handler, the placement
// and the dispatch of what it placed.
type centralBroker struct {
	n    *node.Node
	key  crypto.PrivKey
	self string
	bg   context.Context
	db   *store.Store // a durable broker's records (brokerRequest.Durable)

	place sync.Mutex // one placement at a time: the broker never races itself

	mu      sync.Mutex      // guards the fields below
	leased  map[string]int  // by provider: GPUs of this broker's leases whose runs have not ended
	placed  int             // leases obtained
	held    []time.Duration // each placement's own time, its wait for the lock excluded
	ran     int             // dispatched jobs that completed
	failed  []error         // dispatched jobs that did not
	running sync.WaitGroup  // dispatched jobs still running
}

// startBroker makes node n a central broker until ctx ends. Its records,
// for durable requests, are kept in dir.
func startBroker(ctx context.Context, n *node.Node, dir string) (*centralBroker, error) {
	key, err := n.Repo().Identity()
	if err != nil {
		return nil, err
	}
	db, err := store.Open(filepath.Join(dir, "broker.db"))
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { _ = db.Close() })
	br := &centralBroker{n: n, key: key, self: n.Host().ID().String(), bg: ctx, db: db, leased: map[string]int{}}
	lh := n.Host().LibP2P()
	proto := n.Host().ProtocolID(brokerProto)
	lh.SetStreamHandler(proto, br.serve)
	context.AfterFunc(ctx, func() { lh.RemoveStreamHandler(proto) })
	return br, nil
}

func (br *centralBroker) serve(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(brokerServeWait))
	var req brokerRequest
	if err := wire.Read(s, brokerFrame, &req); err != nil {
		_ = s.Reset()
		return
	}
	spec, l, raw, err := br.placeJob(req.Spec, req.Durable)
	if err != nil {
		_ = wire.Write(s, brokerReply{Error: err.Error()})
		return
	}
	if err := wire.Write(s, brokerReply{Lease: raw}); err != nil {
		// The renter is gone; the lease still holds the provider's GPUs
		// and is run like any other, so that the drain is the same.
		_ = s.Reset()
	}
	br.dispatch(spec, l, raw, req.Spec)
}

// placeJob validates specYAML and obtains a co-signed lease for it from
// the cheapest provider that will run it; durable, it records the job
// first and its lease before it answers.
func (br *centralBroker) placeJob(specYAML []byte, durable bool) (*auction.JobSpec, *auction.Lease, []byte, error) {
	spec, err := auction.ParseJobSpec(specYAML) // bounds the size first
	if err != nil {
		return nil, nil, nil, err
	}
	hash, err := auction.SpecHash(spec)
	if err != nil {
		return nil, nil, nil, err
	}
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	jobID := "central-" + hex.EncodeToString(id)
	rec := brokerRecord{Spec: specYAML, Received: time.Now()}
	if durable {
		if err := br.record(jobID, rec); err != nil {
			return nil, nil, nil, err
		}
	}
	l, raw, err := br.placeLocked(jobID, specYAML, spec, hash)
	if err != nil {
		return nil, nil, nil, err
	}
	if !durable {
		return spec, l, raw, nil
	}
	// Outside the one-at-a-time lock, so that it queues no placement
	// behind it: the broker's most favourable order.
	rec.Lease = raw
	if err := br.record(jobID, rec); err != nil {
		return nil, nil, nil, err
	}
	return spec, l, raw, nil
}

func (br *centralBroker) record(jobID string, rec brokerRecord) error {
	return br.db.Update(func(tx *store.Tx) error { return tx.Put(store.BucketJobs, jobID, rec) })
}

// placeLocked is the placement itself, one at a time.
func (br *centralBroker) placeLocked(jobID string, specYAML []byte, spec *auction.JobSpec, hash []byte) (*auction.Lease, []byte, error) {
	br.place.Lock()
	defer br.place.Unlock()
	t0 := time.Now()
	var tried []string
	for _, o := range br.candidates(spec) {
		l, raw, why := br.lease(jobID, specYAML, spec, hash, o.Provider)
		if why != "" {
			tried = append(tried, o.Provider+": "+why)
			continue
		}
		br.mu.Lock()
		br.leased[o.Provider] += spec.Resources.GPUs
		br.placed++
		br.held = append(br.held, time.Since(t0))
		br.mu.Unlock()
		return l, raw, nil
	}
	return nil, nil, fmt.Errorf("no provider took the job (%d asked: %s)", len(tried), strings.Join(tried, "; "))
}

// candidates are the feasible offers with enough GPUs free by the
// broker's count, cheapest floor for the job's tier first (provider ID
// on equal floors).
func (br *centralBroker) candidates(spec *auction.JobSpec) []*auction.Offer {
	ok, _ := auction.Feasible(spec, br.n.Book().Snapshot(), auction.Env{Now: time.Now()})
	br.mu.Lock()
	free := ok[:0]
	for _, o := range ok {
		if len(o.GPUs)-br.leased[o.Provider] >= spec.Resources.GPUs {
			free = append(free, o)
		}
	}
	br.mu.Unlock()
	slices.SortFunc(free, func(a, b *auction.Offer) int {
		return cmp.Or(cmp.Compare(a.Prices.Of(spec.Tier), b.Prices.Of(spec.Tier)), strings.Compare(a.Provider, b.Provider))
	})
	return free
}

// lease asks provider for a quote and awards it at its bid: the co-signed
// lease, or why not.
func (br *centralBroker) lease(jobID string, specYAML []byte, spec *auction.JobSpec, hash []byte, provider string) (*auction.Lease, []byte, string) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	var q wire.QuoteReply
	if err := br.exchange(provider, wire.QuoteProto, brokerQuoteWait, wire.QuoteRequest{JobID: jobID, Nonce: nonce, Spec: specYAML}, &q); err != nil {
		return nil, nil, "quote: " + err.Error()
	}
	if q.Decline != "" {
		return nil, nil, "declined: " + q.Decline
	}
	bid, _, err := auction.DecodeSignedBid(q.Bid, time.Now())
	switch {
	case err != nil:
		return nil, nil, "bad bid: " + err.Error()
	case bid.Provider != provider || bid.JobID != jobID || !bytes.Equal(bid.Nonce, nonce) || !bytes.Equal(bid.SpecHash, hash):
		return nil, nil, "bad bid: not for this job, round, spec or provider"
	case bid.Price > spec.MaxPrice:
		br.release(provider, jobID, nonce)
		return nil, nil, "bid over the job's max price"
	}
	sl, err := auction.ProposeLease(&auction.Lease{
		JobID: jobID, Network: br.n.Network(), Renter: br.self, Provider: provider,
		Tier: spec.Tier, Price: bid.Price, GPUs: spec.Resources.GPUs,
		Start: bid.Start, End: bid.Start + bid.DurationSec, NoticeSec: bid.NoticeSec,
		BillingSec: brokerBilling, Bid: q.Bid, GPUUUIDHash: bid.GPUHashes, SpecHash: bid.SpecHash,
	}, br.key)
	if err != nil {
		return nil, nil, "proposal: " + err.Error()
	}
	prop, err := sl.Marshal()
	if err != nil {
		return nil, nil, "proposal: " + err.Error()
	}
	var a wire.AwardReply
	if err := br.exchange(provider, wire.AwardProto, brokerAwardWait, wire.AwardRequest{Lease: prop}, &a); err != nil {
		br.release(provider, jobID, nonce)
		return nil, nil, "award: " + err.Error()
	}
	if a.Refused != "" {
		br.release(provider, jobID, nonce)
		return nil, nil, "refused: " + a.Refused
	}
	l, got, err := auction.DecodeSignedLease(a.Lease, true)
	if err != nil || !bytes.Equal(got.Body, sl.Body) {
		return nil, nil, fmt.Sprintf("the co-signed lease is not the one proposed (%v)", err)
	}
	return l, a.Lease, ""
}

// release drops the hold of a quote that will not be awarded, as a
// renter's round does for its losers; best effort.
func (br *centralBroker) release(provider, jobID string, nonce []byte) {
	_ = br.exchange(provider, wire.QuoteProto, brokerQuoteWait, wire.QuoteRequest{JobID: jobID, Nonce: nonce, Release: true}, nil)
}

// exchange is one request and (unless rep is nil) one reply on a fresh
// stream to provider, as a renter node's Exchange.
func (br *centralBroker) exchange(provider, proto string, wait time.Duration, req, rep any) error {
	pid, err := peer.Decode(provider)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(br.bg, wait)
	defer cancel()
	s, err := br.n.Host().LibP2P().NewStream(ctx, pid, br.n.Host().ProtocolID(proto))
	if err != nil {
		return err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(wait))
	if err := wire.Write(s, req); err != nil || rep == nil {
		return err
	}
	return wire.Read(s, wire.MaxEventFrame, rep)
}

// dispatch starts the leased job on its provider and follows it to its
// exit in the background, as the renter's node does after a market
// lease; its GPUs count as free again once the exit is heard.
func (br *centralBroker) dispatch(spec *auction.JobSpec, l *auction.Lease, raw, specYAML []byte) {
	br.running.Add(1)
	go func() {
		defer br.running.Done()
		br.ended(l.Provider, spec.Resources.GPUs, br.run(l, raw, specYAML))
	}()
}

func (br *centralBroker) run(l *auction.Lease, raw, specYAML []byte) error {
	pid, err := peer.Decode(l.Provider)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(br.bg, brokerRunWait)
	defer cancel()
	s, err := br.n.Host().LibP2P().NewStream(ctx, pid, br.n.Host().ProtocolID(wire.JobProto))
	if err != nil {
		return fmt.Errorf("job %s: %w", l.JobID, err)
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(brokerRunWait))
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	if err := wire.WriteJobRequest(s, &wire.JobRequest{Kind: "start", Lease: raw, Spec: specYAML, Nonce: nonce}); err != nil {
		return fmt.Errorf("job %s: start: %w", l.JobID, err)
	}
	for {
		var ev wire.Event
		if err := wire.Read(s, wire.MaxEventFrame, &ev); err != nil {
			return fmt.Errorf("job %s: the job stream ended before the exit: %w", l.JobID, err)
		}
		switch ev.Type {
		case wire.EventExit:
			if ev.Status != wire.StatusCompleted || ev.ExitCode != 0 {
				return fmt.Errorf("job %s: exited %s, code %d: %s", l.JobID, ev.Status, ev.ExitCode, ev.Error)
			}
			return nil
		case wire.EventError:
			return fmt.Errorf("job %s: %s (%s)", l.JobID, ev.Error, ev.Code)
		}
	}
}

func (br *centralBroker) ended(provider string, gpus int, err error) {
	br.mu.Lock()
	defer br.mu.Unlock()
	br.leased[provider] -= gpus
	if err != nil {
		br.failed = append(br.failed, err)
	} else {
		br.ran++
	}
}

// wait returns once every dispatched job has ended, with the failures
// among them since the last wait.
func (br *centralBroker) wait() error {
	br.running.Wait()
	br.mu.Lock()
	defer br.mu.Unlock()
	err := errors.Join(br.failed...)
	br.failed = nil
	return err
}

// counts are the leases the broker obtained and the dispatched jobs that
// completed.
func (br *centralBroker) counts() (placed, ran int) {
	br.mu.Lock()
	defer br.mu.Unlock()
	return br.placed, br.ran
}

// placements returns the time each placement since the last call took
// once it held the lock: the broker's service time, without the queue.
func (br *centralBroker) placements() []time.Duration {
	br.mu.Lock()
	defer br.mu.Unlock()
	out := br.held
	br.held = nil
	return out
}

// submitToBroker is the renter's side: from sends specYAML to the broker
// on from's own host and returns the lease it answers, verified: co-signed
// by both, for the spec sent, naming the broker as its renter.
func submitToBroker(ctx context.Context, from *node.Node, broker peer.ID, specYAML []byte, durable bool) (*auction.Lease, []byte, error) {
	s, err := from.Host().LibP2P().NewStream(ctx, broker, from.Host().ProtocolID(brokerProto))
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := wire.Write(s, brokerRequest{Spec: specYAML, Durable: durable}); err != nil {
		return nil, nil, err
	}
	var rep brokerReply
	if err := wire.Read(s, brokerFrame, &rep); err != nil {
		return nil, nil, err
	}
	if rep.Error != "" {
		return nil, nil, errors.New("broker: " + rep.Error)
	}
	l, _, err := auction.DecodeSignedLease(rep.Lease, true)
	if err != nil {
		return nil, nil, err
	}
	spec, err := auction.ParseJobSpec(specYAML)
	if err != nil {
		return nil, nil, err
	}
	hash, err := auction.SpecHash(spec)
	if err != nil {
		return nil, nil, err
	}
	if l.Renter != broker.String() || !bytes.Equal(l.SpecHash, hash) {
		return nil, nil, fmt.Errorf("broker: the lease (renter %s) is not for the spec sent from this broker", l.Renter)
	}
	return l, rep.Lease, nil
}
