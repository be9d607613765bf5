package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"slices"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// runEnd is how one leased run ended, as the renter saw it: what becomes
// of the job, and the result its outcome entry records.
type runEnd struct {
	state      string               // a terminal state, or "" when the job should be auctioned again
	result     ledger.OutcomeResult // for the outcome entry: the provider's part in the end
	why        string
	checkpoint []byte // shipped back by a preempted run
	// notStarted: the provider could not start the job, so nothing ran
	// and nothing is charged; pull: because it could not pull the image.
	notStarted, pull bool
}

// follow1 starts the leased job on the provider and records its events
// until it exits. A provider that sends nothing (not even a heartbeat) for
// lostAfter is lost, and the run is retried elsewhere, with one exception:
// a reservation whose provider is lost before its job began (a provider
// restarting before the window) is started again on the same lease, for
// up to reserveRetry, since a restarted provider keeps the reservation.
func (r *renterJobs) follow1(id string, spec *auction.JobSpec, l *auction.Lease, leaseRaw, specYAML []byte, secrets map[string]string, ckpt []byte) runEnd {
	var give time.Time // reserveRetry after the provider was first lost
	for again := false; ; again = true {
		out := r.followOnce(id, spec, l, leaseRaw, specYAML, secrets, ckpt, again)
		j, _ := r.get(id)
		lost := out.result == ledger.OutcomeAbandoned || (again && strings.HasPrefix(out.why, "cannot reach the provider"))
		waiting := j != nil && j.State == StateReserved && out.state == "" && lost
		if give.IsZero() {
			give = time.Now().Add(reserveRetry)
		}
		if !waiting || time.Now().After(give) || r.bg.Err() != nil {
			return out
		}
		r.update(id, out.why+"; the job had not begun: starting the reservation again", func(*JobRecord) {})
		select {
		case <-r.bg.Done():
			return out
		case <-time.After(time.Second):
		}
	}
}

// reserveRetry bounds how long a renter keeps starting a reservation
// again whose provider it lost before the job began: a provider's restart.
const reserveRetry = 2 * time.Minute

// followOnce is one start of the leased job and the following of its
// events; again: a reservation started once more after its provider was
// lost, which reaches the provider as after a restart and takes a refusal
// (the provider no longer holds the lease) as the provider's failure.
func (r *renterJobs) followOnce(id string, spec *auction.JobSpec, l *auction.Lease, leaseRaw, specYAML []byte, secrets map[string]string, ckpt []byte, again bool) runEnd {
	ctx, cancel := context.WithDeadline(r.bg, time.Unix(l.End, 0).Add(time.Duration(l.NoticeSec)*time.Second+time.Minute))
	defer cancel()
	pid, err := peer.Decode(l.Provider)
	if err != nil {
		return runEnd{state: StateFailed, result: ledger.OutcomeFailed, why: err.Error()}
	}
	var s network.Stream
	if again {
		s, err = r.dialAfterRestart(pid)
	} else {
		s, err = r.m.Host().LibP2P().NewStream(ctx, pid, r.m.Host().ProtocolID(jobProto))
	}
	if err != nil {
		return runEnd{result: ledger.OutcomeFailed, why: "cannot reach the provider: " + err.Error()}
	}
	defer s.Close()
	// A stopping node hangs up at once rather than reading on until the
	// provider next speaks.
	defer context.AfterFunc(r.bg, func() { _ = s.Reset() })()
	nonce := randomNonce()
	if err := writeMsg(s, jobRequest{Kind: "start", Lease: leaseRaw, Spec: specYAML, Secrets: secrets, Checkpoint: ckpt, Nonce: nonce}); err != nil {
		return runEnd{result: ledger.OutcomeAbandoned, why: "lost the provider: " + err.Error()}
	}
	first := uint64(1)
	if j, err := r.get(id); again && err == nil && j.BilledLease == leaseCID(leaseRaw) {
		first = uint64(j.Vouchers) + 1 // the same lease: its vouchers go on
	}
	r.startPaying(ctx, id, s, l, leaseRaw, first)
	tel := newTelemetry(pid, leaseCID(leaseRaw), nonce)
	if r.claims != nil {
		tel.claimOf = r.claims.claimOf
		tel.onProof = func(proof []byte) {
			r.log.Warn("provider's telemetry contradicts its hardware claim: journaling the proof", "provider", l.Provider, "job", id)
			_ = r.journal.enqueue(ledger.TypeFraudProof, proof)
		}
	}
	out := r.followStream(id, spec, s, tel)
	r.recordTelemetry(tel)
	if again && out.state == StateFailed && out.result == ledger.OutcomeFailed && strings.HasPrefix(out.why, "provider: ") {
		// The restarted provider refused the start: it no longer holds
		// the reservation. Its failure; the job is auctioned again.
		out.state = ""
	}
	return out
}

// recordTelemetry journals the run's telemetry digest: evidence for (or
// against) the provider's hardware claims.
func (r *renterJobs) recordTelemetry(t *telemetry) {
	if t.sum.Samples+t.sum.Rejected == 0 {
		return
	}
	payload, err := json.Marshal(ledger.TelemetryDigest{Lease: t.lease, Provider: t.provider.String(), Summary: t.sum})
	if err == nil {
		_ = r.journal.enqueue(ledger.TypeTelemetryDigest, payload)
	}
}

// followStream records a provider's job events from s until the job ends
// or the provider is lost.
// tel verifies the run's telemetry; nil when the chain cannot be checked
// from its start (after this node restarted).
func (r *renterJobs) followStream(id string, spec *auction.JobSpec, s network.Stream, tel *telemetry) runEnd {
	var shipped []byte
	for {
		_ = s.SetReadDeadline(time.Now().Add(lostAfter))
		var ev wireEvent
		if err := readMsg(s, maxEventFrame, &ev); err != nil {
			if j, _ := r.get(id); j != nil && j.State == StateCancelled {
				return runEnd{state: StateCancelled, result: ledger.OutcomeCancelled}
			}
			return runEnd{result: ledger.OutcomeAbandoned, why: "lost the provider: " + err.Error()}
		}
		switch ev.Type {
		case "log":
			r.appendLog(id, ev.Log)
		case "telemetry":
			if tel != nil {
				tel.accept(ev.Log)
				sum := tel.sum
				r.update(id, "", func(j *JobRecord) { j.Telemetry = &sum })
			}
		case "checkpoint":
			if len(shipped)+len(ev.Log) <= maxCheckpoint {
				shipped = append(shipped, ev.Log...)
			}
		case "status":
			r.onStatus(id, ev)
		case "exit":
			code, end := ev.ExitCode, time.Now()
			var disputed string
			r.update(id, "", func(j *JobRecord) {
				t := ev.Time.UTC()
				j.ExitCode, j.EndedAt, j.PullMS, j.Output = &code, &t, ev.PullMS, ""
				if _, err := auction.ParseSHA256(ev.Output); err == nil {
					j.Output = ev.Output // anything else is no answer at all
				}
				if ev.Charged != nil { // the provider's word, checked against this node's own bound
					disputed = recordCharge(j, *ev.Charged, end)
				}
			})
			if disputed != "" {
				r.log.Warn("provider's charge disputed", "job", id, "why", disputed)
				r.update(id, disputed, func(*JobRecord) {})
			}
			j, _ := r.get(id)
			switch {
			case j != nil && j.State == StateCancelled:
				return runEnd{state: StateCancelled, result: ledger.OutcomeCancelled}
			case ev.Status == "unpaid":
				return runEnd{state: StateFailed, result: ledger.OutcomeFailed, why: "the provider stopped the job: no voucher arrived in time"}
			case ev.Status == "preempted":
				return runEnd{result: ledger.OutcomePreempted, why: "preempted: " + ev.Error, checkpoint: shipped}
			case code == 0:
				return runEnd{state: StateCompleted, result: ledger.OutcomeCompleted}
			case slices.Contains(spec.Retry.OnExitCodes, code):
				return runEnd{result: ledger.OutcomeFailed, why: fmt.Sprintf("exit code %d asks for a retry", code)}
			default:
				return runEnd{state: StateFailed, result: ledger.OutcomeFailed, why: fmt.Sprintf("the job exited with code %d", code)}
			}
		case "error":
			if ev.Status == statusNotStarted {
				// The provider could not start the job (a reservation at
				// its window, or any job whose image it cannot pull or
				// whose container it cannot start): nothing ran, the
				// provider's fault, and the job is auctioned again at once
				// without it (see run for the bounds).
				return runEnd{result: ledger.OutcomeFailed, why: "provider: " + ev.Error, notStarted: true,
					pull: strings.HasPrefix(ev.Error, providing.PullFailed)}
			}
			return runEnd{state: StateFailed, result: ledger.OutcomeFailed, why: "provider: " + ev.Error}
		}
	}
}

// lostAfter is three missed heartbeats: a provider that vanished is
// noticed within 15 s.
const lostAfter = 3 * heartbeatEvery

func (r *renterJobs) onStatus(id string, ev wireEvent) {
	state := map[string]string{"reserved": StateReserved, "pulling": StatePulling, "running": StateRunning,
		"preempting": StatePreempting, "paused": StatePaused}[ev.Status]
	if state == "" {
		return
	}
	r.update(id, ev.Error, func(j *JobRecord) {
		if terminal(j.State) || j.State == StateCancelled {
			return
		}
		j.State = state
		if state == StateRunning {
			t := ev.Time.UTC()
			j.StartedAt = &t
		}
	})
}

func (r *renterJobs) fail(id string, err error) {
	r.update(id, err.Error(), func(j *JobRecord) {
		if !terminal(j.State) {
			j.State, j.Error = StateFailed, err.Error()
		}
	})
}

// cancel asks the provider to stop the job (with the lease's notice).
func (r *renterJobs) cancel(ctx context.Context, id string) (*JobRecord, error) {
	j, err := r.get(id)
	if err != nil {
		return nil, err
	}
	if terminal(j.State) {
		return j, fmt.Errorf("job %s has already ended (%s)", id, j.State)
	}
	r.update(id, "cancelled by the renter", func(j *JobRecord) { j.State = StateCancelled })
	if len(j.Lease) > 0 {
		var ev wireEvent
		if err := r.exchange(ctx, j.Provider, jobProto, jobRequest{Kind: "cancel", Lease: j.Lease}, &ev); err != nil {
			return nil, fmt.Errorf("job marked cancelled, but the provider could not be told: %w", err)
		}
		if ev.Type == "error" {
			return nil, fmt.Errorf("job marked cancelled, but the provider said: %s", ev.Error)
		}
	}
	return r.get(id)
}

// reattach follows, after this node restarted, a job that was running on
// a provider: the provider still runs it and streams the rest of its
// output. If the provider no longer runs it, the job fails with a reason
// (its secrets were never stored, so it cannot be re-auctioned blindly).
func (r *renterJobs) reattach(id string) {
	j, err := r.get(id)
	if err != nil {
		return
	}
	if j.Group != "" {
		// However this ends (even unreachable), the group is decided.
		defer r.compareReplicas(j.Group)
	}
	spec, err := auction.ParseJobSpec([]byte(j.Spec))
	if err != nil {
		r.fail(id, err)
		return
	}
	l, _, err := auction.DecodeSignedLease(j.Lease, true)
	if err != nil {
		r.fail(id, err)
		return
	}
	pid, _ := peer.Decode(l.Provider)
	s, err := r.dialAfterRestart(pid)
	if err == nil {
		defer s.Close()
		defer context.AfterFunc(r.bg, func() { _ = s.Reset() })()
		err = writeMsg(s, jobRequest{Kind: "attach", Lease: j.Lease})
	}
	if r.bg.Err() != nil {
		return // stopping again: the record stays leased, for the next start
	}
	if err != nil {
		r.fail(id, fmt.Errorf("this node restarted and cannot reach the job's provider again: %w; resubmit the job", err))
		return
	}
	r.startPaying(r.bg, id, s, l, j.Lease, uint64(j.Vouchers)+1)
	out := r.followStream(id, spec, s, nil)
	if r.bg.Err() != nil {
		return
	}
	if out.state == "" {
		out.state = StateFailed
	}
	out = r.checkAnswer(id, spec, j.LeaseCID, l.Provider, out)
	r.update(id, out.why, func(j *JobRecord) {
		if j.State != StateCancelled {
			j.State, j.Error = out.state, out.why
		}
	})
}

// dialAfterRestart opens a job stream to a provider right after this node
// started, when it knows no address yet: it waits for the DHT, looks the
// provider up and retries for up to 30 s.
func (r *renterJobs) dialAfterRestart(pid peer.ID) (network.Stream, error) {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) && r.bg.Err() == nil {
		ctx, cancel := context.WithTimeout(r.bg, 5*time.Second)
		if len(r.m.Host().LibP2P().Peerstore().Addrs(pid)) == 0 && r.m.Host().DHT().RoutingTable().Size() > 0 {
			if ai, err := r.m.Host().DHT().FindPeer(ctx, pid); err == nil {
				r.m.Host().LibP2P().Peerstore().AddAddrs(pid, ai.Addrs, time.Hour)
			}
		}
		s, err := r.m.Host().LibP2P().NewStream(ctx, pid, r.m.Host().ProtocolID(jobProto))
		cancel()
		if err == nil {
			return s, nil
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	if last == nil {
		last = r.bg.Err()
	}
	return nil, last
}

// startPaying sends this run's vouchers, from voucher number first, until
// ctx ends or the stream does; each one is recorded in the job. The first
// waits for the lease's window start (payLoop). A new run (a lease the
// job's billing fields do not belong to yet) starts its bill afresh, and
// notes when this node asked for the start: the renter's own bound on
// what the provider may charge counts from then (chargeBound).
func (r *renterJobs) startPaying(ctx context.Context, id string, s network.Stream, l *auction.Lease, leaseRaw []byte, first uint64) {
	cid, now := leaseCID(leaseRaw), time.Now().UTC()
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
		payLoop(ctx, s, r.key, l, leaseCID(leaseRaw), first, r.stopPayingAfter, func(n uint64, total auction.Credits, raw []byte) {
			r.update(id, "", func(j *JobRecord) { j.Vouchers, j.Paid, j.LastVoucher = int(n), total, raw })
		})
	})
}
