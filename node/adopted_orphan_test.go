package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	sched "github.com/gleaner-net/gleaner/auction/provider"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/wire"
)

// A provider killed while a job runs adopts its container at the next
// start; when the job's renter never comes back (never attaches, never
// pays), the adopted job is stopped as unpaid within the lease's voucher
// grace, with a line in the owner's log naming the job and the renter,
// and its GPU is free again: it does not hold the GPU for the patience
// of a renter that is gone.
func TestAnAdoptedJobWhoseRenterIsGoneIsStoppedWithinTheGrace(t *testing.T) {
	waitsOnItsOwnJobs(t)
	logs := newLogWatch()
	r := newHostileRig(t, Options{Logger: logs.logger()}, nil)
	const job = "orphan"
	spec := hostileSpec(job, "120s")
	b, raw := r.quote(job, spec)
	// A short interval: a grace of 4 s, a patience of 16 s.
	lease, refused := r.award(r.leaseFor(b, raw, func(l *auction.Lease) { l.BillingSec = 8 }))
	if refused != "" {
		t.Fatalf("award refused: %s", refused)
	}
	l, _, err := auction.DecodeSignedLease(lease, true)
	if err != nil {
		t.Fatal(err)
	}
	grace := sched.Grace(l)
	s := r.start(lease, spec)
	for {
		ev := nextEvent(t, s, "status")
		if ev.Type == "error" {
			t.Fatalf("the job did not start: %+v", ev)
		}
		if ev.Status == "running" {
			break
		}
	}

	// Killed, and started again; the renter, a bare host, never comes
	// back to the new address.
	crashNode(t, r.prov)
	r.prov = startAgain(t, r.ctx, r.prov)
	restarted := time.Now()
	if st, _ := r.prov.providerJobs.LeaseState(job); st != providing.LeaseLaunched || !r.prov.providerJobs.Holds(job) {
		t.Fatalf("after the restart the lease is %q (held: %v), want %q and held: adopted", st, r.prov.providerJobs.Holds(job), providing.LeaseLaunched)
	}

	// Within the grace, and the few seconds its stop takes.
	waitFor(t, grace+8*time.Second, "the adopted job stopped and its GPU free", func() bool { return !r.prov.providerJobs.Holds(job) })
	t.Logf("stopped and freed %v after the restart (grace %v)", time.Since(restarted).Round(100*time.Millisecond), grace)
	if n := len(r.prov.providerJobs.Leases(time.Now())); n != 0 {
		t.Errorf("the scheduler holds %d leases after the stop, want none", n)
	}
	if bs := r.prov.providerJobs.Booked(time.Now()); len(bs) != 0 {
		t.Errorf("the provider still books %+v after the stop, want its GPU free", bs)
	}
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	line, ok := logs.await(ctx, "stopping an adopted job", "job="+job, "renter="+r.h.ID().String())
	if !ok {
		t.Fatalf("no log line says the adopted job was stopped, naming it and its renter:\n%s", logs.matching("part=provider-jobs"))
	}
	if !strings.Contains(line, "did not come back") {
		t.Errorf("the log line does not say why: %s", line)
	}
	if st, _ := r.prov.providerJobs.LeaseState(job); st != providing.LeaseEnded {
		t.Errorf("after the stop the lease is %q, want %q", st, providing.LeaseEnded)
	}
	ss := settlementsOf(t, r.prov, wire.LeaseCID(lease))
	if len(ss) != 1 || !ss[0].Unpaid {
		t.Fatalf("settlements of the lease %+v, want one, unpaid", ss)
	}
	waitFor(t, 30*time.Second, "the adopted container removed", func() bool { id, _ := jobContainer(t, r.prov, job); return id == "" })
}
