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
