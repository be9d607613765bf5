package sim

import (
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// A newcomer's award is left out of its provider's bookings until it
// starts; the start must be published, as node's publisher does on its
// next poll. Otherwise the offer shows the GPU free for the lease's whole
// run and a job waiting behind it is quoted "fully utilised" every round.
// Here one provider's only GPU runs a first renter's job for hours: the
// second job must see no free GPU, so no quote is declined as busy.
func TestAStartedNewcomersLeaseIsPublished(t *testing.T) {
	s, job := oneProvider(1)
	// The horizon stays inside the offer's hourly re-announcement, which
	// would publish the booking anyway.
	d := &Demand{Renters: []Behaviour{Honest, Honest}, Jobs: []Job{job("first", 120, 4*3600, 0), job("waits", 600, 600, 1)}}
	st, stats, err := RunMarket(DefaultConfig(), s, d, 50*60, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Outcomes[0].Runs) == 0 || st.Outcomes[0].Done == 0 || len(st.Outcomes[1].Runs) != 0 {
		t.Fatalf("want the first job running to the horizon, the second waiting: %+v", st.Outcomes)
	}
	if stats.QuotesBusy != 0 {
		t.Fatalf("%d quotes declined as fully utilised: the offer kept showing the running lease's GPU free", stats.QuotesBusy)
	}
}

// A lease that ends before the end it booked frees its GPU in its
// provider's offer within freedGap of the last publication (and the
// gossip delay), as node's publisher does, not bookingsGap after it: a
// job submitted seconds after the first one ended finds the GPU free in
// its first round. Otherwise its book shows the provider full, its round
// finds no match, and it waits for the book while the GPU idles. Here a
// second job, submitted 6 s before the first job ends, has its lease
// published moments before that end, so that end comes inside
// bookingsGap. (Submitted 10 s or more before, its publication comes
// bookingsGap or more before the end, and the old rule publishes the end
// at once too: the scenario would not tell the rules apart. With the old
// rule, offsets 4 to 8 s make the third job wait its 300 s retry.)
func TestAFreedGPUIsPublishedWithinSeconds(t *testing.T) {
	s, job := oneProvider(2)
	first := job("first", 120, 600, 0)
	d := &Demand{Renters: []Behaviour{Honest, Honest, Honest}, Jobs: []Job{first}}
	st, _, err := RunMarket(DefaultConfig(), s, d, 50*60, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Outcomes[0].Completed {
		t.Fatalf("the first job alone did not complete: %+v", st.Outcomes[0])
	}
	ended := st.Outcomes[0].Finished
	// A job's container starts a fixed time after its lease: the first
	// job's, after its submission.
	startup := st.Outcomes[0].Runs[0].Start - first.Submit
	d.Jobs = []Job{first, job("long", ended-6, 3600, 1), job("next", ended+2, 600, 2)}
	st, _, err = RunMarket(DefaultConfig(), s, d, 50*60, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Outcomes[0].Finished; got != ended {
		t.Fatalf("the first job ended at %d beside the others, %d alone: the runs differ before they come", got, ended)
	}
	long, next := st.Outcomes[1], st.Outcomes[2]
	if len(long.Runs) == 0 || len(next.Runs) == 0 {
		t.Fatalf("the second or third job never ran: %+v, %+v", long, next)
	}
	if wait := next.Runs[0].Start - (ended + 2) - startup; wait > 1 {
		t.Fatalf("the third job started %d s later than a job on a free GPU does: its book still showed the GPU the first job freed booked", wait)
	}
}

// oneProvider is a supply of one provider with gpus RTX 4090s, free all
// day, and job, a silver batch job on one of them from renter r.
func oneProvider(gpus int) (*Supply, func(id string, submit, dur int64, r int) Job) {
	od := auction.Credits(400_000)
	s := &Supply{OnDemand: map[string]auction.Credits{"RTX4090": od}, Providers: []Provider{{
		ID: "p000", Model: "RTX4090", VRAMMiB: 24576, GPUs: gpus, Country: "DE", Continent: "eu",
		Floors:  auction.Prices{Gold: od * 7 / 10, Silver: od * 6 / 10, Bronze: od * 3 / 10},
		Windows: []Span{{0, 86400}},
	}}}
	job := func(id string, submit, dur int64, r int) Job {
		return Job{ID: id, Submit: submit, Duration: dur, GPUs: 1, Models: []string{"RTX4090"}, Tier: auction.Silver,
			Kind: "batch", Renter: r, MaxPrice: od}
	}
	return s, job
}
