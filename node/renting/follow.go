package renting

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/auction/renter"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// runEnd is how one leased run ended, as the renter saw it: what becomes
// of the job, and the result its outcome entry records.
type runEnd struct {
	state      string               // a terminal state, or "" when the job goes on (end says how)
	result     ledger.OutcomeResult // for the outcome entry: the provider's part in the end
	why        string
	checkpoint []byte // shipped back by a preempted run
	// end and cause are the run's end for the job's lifecycle
	// (renter.Lifecycle) when state is "": preempted, lost, not started
	// (cause: why), or an exit the spec retries.
	end   renter.End
	cause renter.StartCause
	// code is the provider's typed refusal of the request (wire.Code),
	// when it refused one: followLease acts on no-lease, started and
	// not-running.
	code wire.Code
	// relayed: the stream ran over a relayed (limited) connection, which
	// the relay resets at its circuit limits (renter.ReattachBound).
	relayed bool
	// heard: the provider answered on the stream with the job's own
	// events (not only a refusal): a loss after it is a new one
	// (renter.TryEnd.Heard).
	heard bool
}

// notStarted: the provider could not start the job, so nothing ran and
// nothing is charged.
func (o runEnd) notStarted() bool { return o.state == "" && o.end == renter.EndNotStarted }

// lost: the provider could not be reached, or its stream broke, before
// the job ended.
func (o runEnd) lost() bool { return o.state == "" && o.end == renter.EndLost }

// typed is the run's end for the job's lifecycle. A run that goes on
// without a typed end (a provider that refused a job it had lost) is the
// provider's failure: lost.
func (o runEnd) typed(provider string) renter.RunEnd {
	e := renter.RunEnd{End: o.end, Cause: o.cause, Provider: provider, Why: o.why, Checkpoint: o.checkpoint}
	switch o.state {
	case StateCompleted:
		e.End = renter.EndCompleted
	case StateCancelled:
		e.End = renter.EndCancelled
	case StateFailed:
		e.End = renter.EndFailed
	case "":
		if e.End == 0 {
			e.End = renter.EndLost
		}
	}
	return e
}

// follow1 starts the leased job on the provider and follows it to its
// end (followLease).
func (r *Jobs) follow1(id string, spec *auction.JobSpec, l *auction.Lease, leaseRaw, specYAML []byte, secrets map[string]string, ckpt []byte) runEnd {
	return r.followStart(id, spec, l, leaseRaw, specYAML, secrets, ckpt, nil)
}

// followStart is follow1 with a gang member's roster (wire.JobRequest.Gang)
// in the start.
func (r *Jobs) followStart(id string, spec *auction.JobSpec, l *auction.Lease, leaseRaw, specYAML []byte, secrets map[string]string, ckpt, gang []byte) runEnd {
	r.mu.Lock()
	auth := r.registryAuth[id]
	r.mu.Unlock()
	start := &wire.JobRequest{Kind: "start", Lease: leaseRaw, Spec: specYAML, Secrets: secrets, Checkpoint: ckpt, RegistryAuth: auth, Gang: gang}
	if r.beforeStart != nil {
		r.beforeStart(id, l.Provider)
	}
	return r.followLease(id, spec, l, leaseRaw, start, false)
}

// followLease runs a leased job's stream to the job's end. start is the
// request that starts it; nil after this node restarted (the secrets
// were never stored): then the job can only be attached to.
//
// A provider lost meanwhile (the stream broke, or nothing, not even a
// heartbeat, came for lostAfter) is not given up at once: this node
// comes back to the same lease, with backoff, for a bounded time
// (reconnectBound), since a provider restarting or a network failing
// for a while must not cost the job. A job that had begun is attached
// to: the provider streams the rest, and the vouchers go on from the
// recorded count. One that had not (a reservation waiting for its
// window, an image being pulled) is started again, since a restarted
// provider keeps a reservation but not its spec, or attached to when
// the provider answers that it still has the first start. A provider
// that answers it holds no such lease did not keep it: the job is
// auctioned again at once. One mechanism for every loss, whichever
// request reaches the provider again.
func (r *Jobs) followLease(id string, spec *auction.JobSpec, l *auction.Lease, leaseRaw []byte, start *wire.JobRequest, restarted bool) runEnd {
	defer r.grantInputs(id, spec, l)()
	policy := renter.NewReattach(start != nil, leaseOver(l))
	var lost runEnd // how the provider was lost, at the current loss's start
	// The tries since the current loss began, for the job's note: a loss
	// after the provider was heard again counts its own.
	var lossAt time.Time
	lossTries := 0
	for try := 0; ; try++ {
		req := start
		if policy.Attach(try, r.begun(id)) {
			req = &wire.JobRequest{Kind: "attach", Lease: leaseRaw}
		}
		out := r.followOnce(id, spec, l, leaseRaw, req, restarted || try > 0)
		if r.bg.Err() != nil {
			return out
		}
		if _, was := policy.Lost(); out.lost() && (!was || out.heard) {
			lost = out // a first loss, or the first after the provider was heard again
		}
		step := policy.After(time.Now(), renter.TryEnd{Refusal: renter.Refusal(out.code), Lost: out.lost(), Bound: r.reconnectBound(id, out.relayed), Heard: out.heard})
		switch step.Do {
		case renter.ReattachReturn:
			return out
		case renter.ReattachNoSecrets:
			out.state, out.why = StateFailed, "the provider restarted and must be sent the job's start again, but its secrets were never stored: resubmit the job"
			return out
		case renter.ReattachReturnLost:
			if step.NoLease {
				lost.why += "; the provider no longer holds the lease"
			}
			return lost
		}
		if step.Wait == 0 {
			continue // the provider's word: start or attach at once
		}
		if j, _ := r.Get(id); j != nil && j.State == StateCancelled {
			return runEnd{state: StateCancelled, result: ledger.OutcomeCancelled}
		}
		what := "re-attaching"
		if !r.begun(id) && !policy.Attaching() {
			what = "starting the job again"
		}
		lostAt, _ := policy.Lost()
		if !lostAt.Equal(lossAt) {
			lossAt, lossTries = lostAt, 0
		}
		lossTries++
		note := fmt.Sprintf("provider lost at %s; %s (try %d, %s left): %s", lostAt.Format(time.TimeOnly), what, lossTries, step.Left.Round(time.Second), out.why)
		r.update(id, note, func(j *JobRecord) {
			if !Terminal(j.State) && j.State != StateCancelled {
				j.Error = note
			}
		})
		select {
		case <-r.bg.Done():
			return out
		case <-time.After(step.Wait):
		}
	}
}

// leaseOver is when a lease's last notice has run out: nothing of it
// can still run after.
func leaseOver(l *auction.Lease) time.Time {
	return time.Unix(l.End, 0).Add(time.Duration(l.NoticeSec) * time.Second)
}

// reconnectBound is how long the renter comes back to job id's lost
// provider (renter.ReattachBound); relayed: the lost stream ran through a
// relay.
func (r *Jobs) reconnectBound(id string, relayed bool) time.Duration {
	j, err := r.Get(id)
	if err != nil {
		return renter.ReattachFor
	}
	if b := renter.ReattachBound(j.State == StateReserved, j.Service != "", relayed); b == 0 || r.reattachFor == 0 {
		return b
	}
	return r.reattachFor
}

// begun: the job's container has run on its current lease (not a
// reservation waiting for its window, nor a job being pulled).
func (r *Jobs) begun(id string) bool {
	j, err := r.Get(id)
	if err != nil {
		return false
	}
	switch j.State {
	case StateRunning, StatePaused, StatePreempting:
		return true
	}
	return false
}

// followOnce sends req (a start or an attach) and follows the job's
// events until it ends or the provider is lost; again: the provider was
// lost before (or this node restarted), so a refused start is the
// provider's failure and the job is auctioned again.
func (r *Jobs) followOnce(id string, spec *auction.JobSpec, l *auction.Lease, leaseRaw []byte, req *wire.JobRequest, again bool) runEnd {
	ctx, cancel := context.WithDeadline(r.bg, leaseOver(l).Add(time.Minute))
	defer cancel()
	pid, err := peer.Decode(l.Provider)
	if err != nil {
		return runEnd{state: StateFailed, result: ledger.OutcomeFailed, why: err.Error()}
	}
	s, err := r.dialProvider(ctx, pid)
	if err != nil {
		return runEnd{result: ledger.OutcomeFailed, why: "cannot reach the provider: " + err.Error(), end: renter.EndLost}
	}
	defer s.Close()
	// A stopping node hangs up at once rather than reading on until the
	// provider next speaks.
	defer context.AfterFunc(r.bg, func() { _ = s.Reset() })()
	if spec.IsService() {
		r.spawn(func() { r.watchLiveness(ctx, id, pid, s) }) // ends with ctx, at this return
	}
	var tel *telemetry
	if req.Kind == "start" {
		req.Nonce = randomNonce()
		tel = newTelemetry(pid, wire.LeaseCID(leaseRaw), req.Nonce)
		if r.claims != nil {
			tel.claimOf = r.claims.claimOf
			tel.onProof = func(proof []byte) {
				r.log.Warn("provider's telemetry contradicts its hardware claim: journaling the proof", "provider", l.Provider, "job", id)
				_ = r.journal.Enqueue(ledger.TypeFraudProof, proof)
			}
		}
	}
	relayed := s.Conn().Stat().Limited
	if err := wire.WriteJobRequest(s, req); err != nil {
		return runEnd{result: ledger.OutcomeAbandoned, why: "lost the provider: " + err.Error(), end: renter.EndLost, relayed: relayed}
	}
	first := uint64(1)
	if j, err := r.Get(id); (again || req.Kind == "attach") && err == nil && j.BilledLease == wire.LeaseCID(leaseRaw) {
		first = uint64(j.Vouchers) + 1 // the same lease: its vouchers go on
	}
	r.startPaying(ctx, id, s, l, leaseRaw, first)
	out := r.followStream(id, spec, s, tel, wire.LeaseCID(leaseRaw), again)
	out.relayed = relayed
	if tel != nil {
		r.recordTelemetry(tel)
	}
	r.flushLogs(id)
	if out.state == StateFailed && out.code != "" {
		switch m, cause := renter.Refused(renter.Refusal(out.code), req.Kind == "start", again, l.Tier); m {
		case renter.RefusalUndecided:
			// The provider, reached again, refused: which way the job
			// goes on is followLease's to decide; by default it is the
			// provider's failure, and the job is auctioned again.
			out.state = ""
		case renter.RefusalNotStarted:
			// The first start, and the provider holds the award no more.
			// Nothing ran, so nothing is charged, and the job is
			// auctioned again.
			out.state, out.end, out.cause = "", renter.EndNotStarted, cause
			switch cause {
			case renter.StartDisplaced:
				// Our own slowness: the outcome is the renter's
				// (cancelled, nothing ran), not held against the provider.
				out.result = ledger.OutcomeCancelled
			case renter.StartTakenBack:
				out.why += " (the award was taken back before it started)"
				out.result = ledger.OutcomePreempted
			default:
				out.why += " (the award was taken back before it started)"
			}
		}
	}
	return out
}

// recordTelemetry journals the run's telemetry digest: evidence for (or
// against) the provider's hardware claims.
func (r *Jobs) recordTelemetry(t *telemetry) {
	if t.sum.Samples+t.sum.Rejected == 0 {
		return
	}
	payload, err := json.Marshal(ledger.TelemetryDigest{Lease: t.lease, Provider: t.provider.String(), Summary: t.sum})
	if err == nil {
		_ = r.journal.Enqueue(ledger.TypeTelemetryDigest, payload)
	}
}

// followStream records a provider's job events from s until the job ends
// or the provider is lost.
// tel verifies the run's telemetry; nil when the chain cannot be checked
// from its start (after this node restarted).
// lease is the run's lease CID, which its log offsets count in;
// reconnected: the stream comes back to a lost provider, and its first
// event clears the note that said so.
func (r *Jobs) followStream(id string, spec *auction.JobSpec, s network.Stream, tel *telemetry, lease string, reconnected bool) (out runEnd) {
	var shipped []byte
	heard := false
	defer func() { out.heard = heard }()
	for {
		_ = s.SetReadDeadline(time.Now().Add(lostAfter))
		var ev wire.Event
		if err := wire.Read(s, wire.MaxEventFrame, &ev); err != nil {
			if j, _ := r.Get(id); j != nil && j.State == StateCancelled {
				return runEnd{state: StateCancelled, result: ledger.OutcomeCancelled}
			}
			return runEnd{result: ledger.OutcomeAbandoned, why: "lost the provider: " + err.Error(), end: renter.EndLost}
		}
		heard = heard || ev.Type != wire.EventError
		if reconnected && ev.Type != wire.EventError {
			reconnected = false
			r.update(id, "the provider is back: following the job again", func(j *JobRecord) {
				if !Terminal(j.State) && j.State != StateCancelled {
					j.Error = ""
				}
			})
		}
		switch ev.Type {
		case wire.EventLog:
			r.appendLog(id, lease, ev)
		case wire.EventTelemetry:
			if tel != nil {
				tel.accept(ev.Log)
				sum := tel.sum
				r.update(id, "", func(j *JobRecord) { j.Telemetry = &sum })
			}
		case wire.EventCheckpoint:
			if len(shipped)+len(ev.Log) <= wire.MaxCheckpoint {
				shipped = append(shipped, ev.Log...)
			}
		case wire.EventStatus:
			r.onStatus(id, ev)
		case wire.EventExit:
			code, end := ev.ExitCode, time.Now()
			var disputed string
			r.update(id, "", func(j *JobRecord) {
				t := ev.Time.UTC()
				j.ExitCode, j.EndedAt, j.PullMS, j.Output, j.Outputs = &code, &t, ev.PullMS, "", ""
				if _, err := auction.ParseSHA256(ev.Output); err == nil {
					j.Output = ev.Output // anything else is no answer at all
				}
				if c, err := cid.Decode(ev.Outputs); err == nil && len(ev.Outputs) <= 128 {
					j.Outputs = c.String()
				}
				if ev.Charged != nil { // the provider's word, checked against this node's own bound
					disputed = recordCharge(j, *ev.Charged, end)
				}
			})
			if disputed != "" {
				r.log.Warn("provider's charge disputed", "job", id, "why", disputed)
				r.update(id, disputed, func(*JobRecord) {})
			}
			j, _ := r.Get(id)
			switch {
			case j != nil && j.State == StateCancelled:
				return runEnd{state: StateCancelled, result: ledger.OutcomeCancelled}
			case ev.Status == wire.StatusUnpaid:
				return runEnd{state: StateFailed, result: ledger.OutcomeFailed, why: "the provider stopped the job: no voucher arrived in time"}
			case ev.Status == wire.StatusPreempted:
				return runEnd{result: ledger.OutcomePreempted, why: "preempted: " + ev.Error, checkpoint: shipped, end: renter.EndPreempted}
			case code == 0:
				// An exit's note says why its outputs were not kept (over
				// max_size: wire.CodeOutputs): the job's error keeps it.
				var why string
				if ev.Error != "" {
					why = "provider: " + ev.Error
				}
				return runEnd{state: StateCompleted, result: ledger.OutcomeCompleted, why: why}
			case slices.Contains(spec.Retry.OnExitCodes, code):
				return runEnd{result: ledger.OutcomeFailed, why: fmt.Sprintf("exit code %d asks for a retry", code), end: renter.EndRetryExit}
			default:
				return runEnd{state: StateFailed, result: ledger.OutcomeFailed, why: fmt.Sprintf("the job exited with code %d", code)}
			}
		case wire.EventError:
			code := wire.LegacyCode(ev) // a provider before job/3 sends no code: its words say
			if ev.Status == wire.StatusNotStarted {
				// The provider could not start the job (a reservation at
				// its window, or any job whose image it cannot pull or
				// whose container it cannot start): nothing ran, the
				// provider's fault, and the job is auctioned again at once
				// without it (renter.Lifecycle bounds how often).
				cause := renter.StartOther
				switch code {
				case wire.CodePull:
					cause = renter.StartPull
				case wire.CodeInputs:
					cause = renter.StartInputs
				}
				return runEnd{result: ledger.OutcomeFailed, why: "provider: " + ev.Error, end: renter.EndNotStarted, cause: cause, code: code}
			}
			return runEnd{state: StateFailed, result: ledger.OutcomeFailed, why: "provider: " + ev.Error, code: code}
		}
	}
}

// lostAfter is three missed heartbeats: a provider that vanished is
// noticed within 15 s.
const lostAfter = 3 * wire.HeartbeatEvery

// statusState is the job record's state for each state a provider's
// status event reports.
var statusState = map[wire.Status]string{wire.StatusReserved: StateReserved, wire.StatusFetching: StateFetching,
	wire.StatusPulling: StatePulling, wire.StatusRunning: StateRunning, wire.StatusPreempting: StatePreempting, wire.StatusPaused: StatePaused}

func (r *Jobs) onStatus(id string, ev wire.Event) {
	state := statusState[ev.Status]
	if state == "" {
		return
	}
	r.update(id, ev.Error, func(j *JobRecord) {
		if Terminal(j.State) || j.State == StateCancelled {
			return
		}
		j.State = state
		if state == StateRunning {
			t := ev.Time.UTC()
			j.StartedAt = &t
		}
	})
}

func (r *Jobs) fail(id string, err error) {
	r.update(id, err.Error(), func(j *JobRecord) {
		if !Terminal(j.State) {
			j.State, j.Error = StateFailed, err.Error()
		}
	})
}

// Cancel asks the provider to stop the job (with the lease's notice).
func (r *Jobs) Cancel(ctx context.Context, id string) (*JobRecord, error) {
	if run := r.arrayOf(id); run != nil {
		return r.cancelArray(run) // every shard in flight
	}
	if run := r.gangOf(id); run != nil {
		return r.cancelGang(run) // every member
	}
	j, err := r.Get(id)
	if err != nil {
		return nil, err
	}
	if Terminal(j.State) {
		return j, fmt.Errorf("job %s has already ended (%s)", id, j.State)
	}
	r.update(id, "cancelled by the renter", func(j *JobRecord) { j.State = StateCancelled })
	if len(j.Lease) > 0 {
		var ev wire.Event
		if err := r.Exchange(ctx, j.Provider, wire.JobProto, wire.JobHead{Kind: "cancel", Lease: j.Lease}, &ev); err != nil {
			return nil, fmt.Errorf("job marked cancelled, but the provider could not be told: %w", err)
		}
		if ev.Type == wire.EventError {
			return nil, fmt.Errorf("job marked cancelled, but the provider said: %s", ev.Error)
		}
	}
	return r.Get(id)
}

// reattach follows, after this node restarted, a job that was leased
// when it stopped: the provider still runs it (or waits for its window)
// and streams the rest of its output; this node comes back to it as to
// any provider it lost (followLease). A job whose lifecycle the record
// kept goes on as run would after the run's end (preempted: auctioned
// again from its checkpoint), unless it needs secrets, which were never
// stored (restored). Otherwise, if the provider no longer holds it, the
// job fails with a reason: it cannot be started again or re-auctioned
// blindly.
func (r *Jobs) reattach(id string) {
	j, err := r.Get(id)
	if err != nil {
		return
	}
	defer r.settled(id)
	if j.Group != "" {
		// However this ends (even unreachable), the group is decided.
		defer r.compareReplicas(j.Group)
	}
	spec, l, err := leased(j)
	if err != nil {
		r.fail(id, err)
		return
	}
	out := r.followLease(id, spec, l, j.Lease, nil, true)
	if r.bg.Err() != nil {
		return // stopping again: the record stays leased, for the next start
	}
	if life := r.restored(j, spec); life != nil {
		if !r.runEnded(id, spec, life, l, j.LeaseCID, j.Explain, out) {
			r.run(id, spec, []byte(j.Spec), nil, life)
		}
		return
	}
	if out.state == "" {
		out.state = StateFailed
		out.why = "this node restarted and its job's provider no longer runs it (" + out.why + "); resubmit the job"
	}
	out = r.checkAnswer(id, spec, j.LeaseCID, l.Provider, out)
	r.update(id, out.why, func(j *JobRecord) {
		if j.State != StateCancelled {
			j.State, j.Error = out.state, out.why
		}
	})
}

// leased is the spec and the lease a leased job's record holds, for
// following it again after a restart.
func leased(j *JobRecord) (*auction.JobSpec, *auction.Lease, error) {
	spec, err := auction.ParseJobSpec([]byte(j.Spec))
	if err != nil {
		return nil, nil, err
	}
	l, _, err := auction.DecodeSignedLease(j.Lease, true)
	if err != nil {
		return nil, nil, err
	}
	return spec, l, nil
}

// dialProvider opens a job stream to a provider, looking its addresses
// up in the DHT when this node knows none (as right after a restart).
// One try of at most DialTimeout: followLease retries.
func (r *Jobs) dialProvider(ctx context.Context, pid peer.ID) (network.Stream, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	h := r.m.Host()
	LearnAddrs(ctx, h, pid)
	return h.LibP2P().NewStream(ctx, pid, h.ProtocolID(wire.JobProto), h.ProtocolID(wire.JobProtoV2))
}

// LearnAddrs looks pid's addresses up in the DHT when the peerstore has
// none (as right after a restart), for the next dial.
func LearnAddrs(ctx context.Context, h *p2p.Host, pid peer.ID) {
	if len(h.LibP2P().Peerstore().Addrs(pid)) == 0 && h.DHT().RoutingTable().Size() > 0 {
		if ai, err := h.DHT().FindPeer(ctx, pid); err == nil {
			h.LibP2P().Peerstore().AddAddrs(pid, ai.Addrs, time.Hour)
		}
	}
}

// DialTimeout bounds one dial of a provider.
const DialTimeout = 5 * time.Second

// startPaying sends this run's vouchers, from voucher number first, until
// ctx ends or the stream does; each one is recorded in the job. The first
// waits for the lease's window start (payLoop). A new run (a lease the
// job's billing fields do not belong to yet) starts its bill afresh, and
// notes when this node asked for the start: the renter's own bound on
// what the provider may charge counts from then (chargeBound).
func (r *Jobs) startPaying(ctx context.Context, id string, s network.Stream, l *auction.Lease, leaseRaw []byte, first uint64) {
	cid, now := wire.LeaseCID(leaseRaw), time.Now().UTC()
	r.update(id, "", func(j *JobRecord) {
		if j.BilledLease == cid {
			return // the same run: followed again after a restart, or a reservation started again
		}
		j.BilledLease, j.Charged, j.Refunded, j.ChargeBound, j.ChargeDisputed = cid, nil, 0, 0, false
		if first == 1 {
			j.StartSent, j.Vouchers, j.Paid, j.LastVoucher = &now, 0, 0, nil
		}
	})
	r.spawn(func() {
		payLoop(ctx, s, r.key, l, wire.LeaseCID(leaseRaw), first, r.stopPayingAfter, func(n uint64, total auction.Credits, raw []byte) {
			r.update(id, "", func(j *JobRecord) { j.Vouchers, j.Paid, j.LastVoucher = int(n), total, raw })
		})
	})
}
