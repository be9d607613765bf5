package provider

import (
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
)

// A job whose process computes on a GPU its lease did not give it is
// stopped, whatever its tier, with ReasonEscaped, once; the GPU it
// escaped onto stays offered and the lease that holds it runs on.
func TestEscapedJobStops(t *testing.T) {
	s := newSched(4)
	mustClaim(t, s, "g", auction.Gold, t0, 0)
	mustClaim(t, s, "b", auction.Bronze, t0, 1)
	a := availability(4, nil)
	a.Escaped = []attest.Escape{{Job: "g", PID: 4321, GPU: 1, GPUUUID: "GPU-1"}, {Job: "g", PID: 4322, GPU: 3}}
	acts := s.SetAvailability(a, at(time.Minute))
	if len(acts) != 1 || acts[0].JobID != "g" || acts[0].Kind != Preempt || acts[0].Reason != ReasonEscaped ||
		acts[0].Message() != "the job escaped its GPUs: pid 4321 on GPU 1 (GPU-1)" {
		t.Fatalf("escape: %+v", acts)
	}
	if acts := s.SetAvailability(a, at(2*time.Minute)); len(acts) != 0 {
		t.Fatalf("stopped again: %s", show(acts))
	}
	if info, ok := s.Lease("b", at(2*time.Minute)); !ok || info.Ending != 0 {
		t.Fatalf("the lease of the GPU escaped onto was ended: %+v", info)
	}
}

// An escaped job is killed at once (a Preempt with no notice): a notice
// would leave it computing on the GPU it escaped onto. A job stopped in
// the same snapshot for a faulty GPU or the hard limit keeps its notice,
// to checkpoint.
func TestEscapedJobGetsNoNotice(t *testing.T) {
	s := newSched(4)
	mustClaim(t, s, "e", auction.Bronze, t0, 0)
	mustClaim(t, s, "f", auction.Silver, t0, 1)
	mustClaim(t, s, "h", auction.Gold, t0, 2)
	a := availability(4, map[int]string{1: "Xid 79", 2: "hot"})
	a.Stop = map[int]string{1: "the driver reported Xid 79", 2: "temperature 96°C over the hard limit 95°C"}
	a.Faults = map[int]string{1: "the driver reported Xid 79"}
	a.Escaped = []attest.Escape{{Job: "e", PID: 99, GPU: 3, GPUUUID: "GPU-03"}}
	acts := s.SetAvailability(a, at(time.Minute))
	if show(acts) != "preempt:e preempt:f preempt:h" {
		t.Fatalf("got %s, want e, f and h stopped", show(acts))
	}
	want := []struct {
		reason string
		notice time.Duration
	}{{ReasonEscaped, 0}, {ReasonGPUFault, 30 * time.Second}, {ReasonHardLimit, 30 * time.Second}}
	for i, w := range want {
		if acts[i].Reason != w.reason || acts[i].Notice != w.notice {
			t.Errorf("%s: %q with notice %v, want %q with %v", acts[i].JobID, acts[i].Reason, acts[i].Notice, w.reason, w.notice)
		}
	}
}
