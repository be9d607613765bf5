package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/libp2p/go-libp2p/core/peer"
)

// follow1 starts the leased job on the provider and records its events
// until it exits. A provider that goes silent for longer than the lease
// allows fails the job (re-auctioning is not built yet).
func (r *renterJobs) follow1(id string, l *auction.Lease, leaseRaw, specYAML []byte, secrets map[string]string) {
	ctx, cancel := context.WithDeadline(r.bg, time.Unix(l.End, 0).Add(time.Duration(l.NoticeSec)*time.Second+time.Minute))
	defer cancel()
	pid, err := peer.Decode(l.Provider)
	if err != nil {
		r.fail(id, err)
		return
	}
	s, err := r.m.host.LibP2P().NewStream(ctx, pid, r.m.host.ProtocolID(jobProto))
	if err != nil {
		r.fail(id, fmt.Errorf("cannot reach the provider: %w", err))
		return
	}
	defer s.Close()
	if err := writeMsg(s, jobRequest{Kind: "start", Lease: leaseRaw, Spec: specYAML, Secrets: secrets}); err != nil {
		r.fail(id, err)
		return
	}
	for {
		var ev jobEvent
		if err := readMsg(s, &ev); err != nil {
			if j, _ := r.get(id); j != nil && terminal(j.State) {
				return
			}
			r.fail(id, fmt.Errorf("lost the provider: %w", err))
			return
		}
		switch ev.Type {
		case "log":
			r.appendLog(id, ev.Log)
		case "status":
			state := map[string]string{"pulling": StatePulling, "running": StateRunning, "cancelled": StateCancelled}[ev.Status]
			if state == "" {
				continue
			}
			r.update(id, "", func(j *JobRecord) {
				if !terminal(j.State) {
					j.State = state
				}
				if state == StateRunning {
					t := ev.Time.UTC()
					j.StartedAt = &t
				}
			})
		case "exit":
			code := ev.ExitCode
			r.update(id, fmt.Sprintf("exit code %d", code), func(j *JobRecord) {
				t := ev.Time.UTC()
				j.ExitCode, j.EndedAt = &code, &t
				switch {
				case j.State == StateCancelled:
				case code == 0:
					j.State = StateCompleted
				default:
					j.State, j.Error = StateFailed, fmt.Sprintf("the job exited with code %d", code)
				}
			})
			return
		case "error":
			r.fail(id, errors.New("provider: "+ev.Error))
			return
		}
	}
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
		var ev jobEvent
		if err := r.exchange(ctx, j.Provider, jobProto, jobRequest{Kind: "cancel", Lease: j.Lease}, &ev); err != nil {
			return nil, fmt.Errorf("job marked cancelled, but the provider could not be told: %w", err)
		}
		if ev.Type == "error" {
			return nil, fmt.Errorf("job marked cancelled, but the provider said: %s", ev.Error)
		}
	}
	return r.get(id)
}
