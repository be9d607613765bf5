// Package sim is the market simulator behind `gleaner sim`: providers and
// renters running the real auctioneer (auction/renter), scheduler and
// billing (auction/provider), clearing and bid engine (auction) and
// reputation (ledger) in virtual time over an in-memory transport, on
// supply and demand read from real traces, beside central baselines and
// an upper bound on the GPU-hours any schedule could fill. The same seed
// gives a byte-identical report. See docs/SIM.md.
package sim

import (
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// Epoch is virtual time zero: a Monday, so that weekly patterns line up.
// Every time in this package is whole seconds from Epoch.
var Epoch = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// At is the instant s seconds after Epoch.
func At(s int64) time.Time { return Epoch.Add(time.Duration(s) * time.Second) }

// Span is [Start, End) in seconds from Epoch.
type Span struct{ Start, End int64 }

// Len is the span's length in seconds.
func (s Span) Len() int64 { return s.End - s.Start }

// Provider is one machine for sale: identical GPUs, a region, floors per
// tier and the windows when its owner lets it sell (the owner's dead time).
type Provider struct {
	ID        string         // stable name, "p00042"
	Model     string         // GPU model as offers name it ("A100-80GB")
	VRAMMiB   int            // per GPU
	GPUs      int            // 1..8
	Country   string         // ISO 3166-1 alpha-2
	Continent string         // af, an, as, eu, na, oc, sa
	Floors    auction.Prices // per GPU-hour
	Windows   []Span         // sorted, disjoint; the idle windows it offers
	Behaviour Behaviour      // honest unless an adversary
}

// Behaviour is how a provider or renter acts; the zero value is honest.
type Behaviour string

// Adversaries.
const (
	Honest   Behaviour = ""
	Skip     Behaviour = "skip"     // provider: takes the lease, does no work, reports none
	Fake     Behaviour = "fake"     // provider: does no work, sends telemetry as if it did
	Abandon  Behaviour = "abandon"  // provider: walks away from a running job part-way
	Refuse   Behaviour = "refuse"   // provider: wins auctions, then refuses the award
	NonPayer Behaviour = "nonpayer" // renter: stops paying after the first interval
)

// Supply is every provider of a run and the on-demand price per GPU-hour
// of each model, the yardstick for renters' savings.
type Supply struct {
	Providers []Provider
	OnDemand  map[string]auction.Credits // model -> on-demand price per GPU-hour
	Sources   []string                   // where each part came from, for the report
}

// Job is one row of the canonical demand CSV (docs/SIM.md).
type Job struct {
	ID       string          // "j000042" or the trace's name
	Submit   int64           // seconds from Epoch
	Duration int64           // seconds of work on GPUs
	GPUs     int             // on one provider
	Models   []string        // acceptable models; empty: any
	Tier     auction.Tier    // gold: a reservation starting at Start
	Start    int64           // gold only: the reserved window's start; 0: Submit + the configured lead
	MaxPrice auction.Credits // per GPU-hour; 0: the on-demand price of the cheapest acceptable model
	Region   string          // continent code or ISO country; empty: anywhere
	Kind     string          // training, batch, inference or serving
	Renter   int             // which renter submits it, 0..M-1
	// Members makes the job a gang (the spec's gang:, issue 36): that
	// many members, each GPUs on its own provider, placed as a unit,
	// started together and stopped together. 0 (or 1): not a gang.
	Members int
	// Shards makes the job an array (the spec's array:, issue 36): that
	// many independent shards, each a job of Duration on GPUs, at most
	// MaxParallel of them placed at once (0: every shard). 0 (or 1): not
	// an array. ExpandArrays turns an array's row into its shards before
	// a run; every strategy then sees each shard as a job.
	Shards      int
	MaxParallel int
	// Array, set on a shard by ExpandArrays, names its array (the row's
	// ID and index); Shard is its index in it.
	Array string
	Shard int
}

// IsArray reports whether the row is an array of two or more shards,
// not yet expanded.
func (j *Job) IsArray() bool { return j.Shards > 1 }

// Parallel is how many shards of the array j belongs to run at once.
func (j *Job) Parallel(shards int) int {
	if j.MaxParallel <= 0 || j.MaxParallel > shards {
		return shards
	}
	return j.MaxParallel
}

// Ranks is how many providers the job runs on at once: its gang's
// members, or 1.
func (j *Job) Ranks() int { return max(j.Members, 1) }

// Gang reports whether the job is a gang of two or more members.
func (j *Job) Gang() bool { return j.Members > 1 }

// Width is the GPUs the job holds at once, over all its members.
func (j *Job) Width() int { return j.GPUs * j.Ranks() }

// Work is the job's GPU-seconds: its duration on every GPU of every
// member.
func (j *Job) Work() int64 { return j.Duration * int64(j.Width()) }

// Demand is the jobs of a run, sorted by Submit.
type Demand struct {
	Jobs    []Job
	Renters []Behaviour // indexed by Job.Renter; Honest unless an adversary
	Sources []string
}

// Run is one stint of a job on one provider's GPUs.
type Run struct {
	Provider  int             // index in Supply.Providers
	GPUs      int             // how many of its GPUs
	Start     int64           // the job's container started
	End       int64           // it stopped, for whatever reason
	Useful    int64           // GPU-seconds of the job's progress made here
	Lost      int64           // GPU-seconds run but lost (preempted past the last checkpoint, or no work done)
	Price     auction.Credits // per GPU-hour, as leased
	Paid      auction.Credits // what the renter paid for this stint
	Preempted bool
}

// Outcome is what became of one job under one strategy.
type Outcome struct {
	Job       int // index in Demand.Jobs
	Runs      []Run
	Completed bool
	Reason    string // why it did not complete; empty if it did
	Done      int64  // GPU-seconds of progress, at most Duration*GPUs
	Finished  int64  // when it completed (seconds from Epoch); 0 if it did not
	// Gold reservations: whether the reserved window was honoured (the
	// job started within a minute of it and was never preempted).
	Honoured bool
}

// Strategy is a way of matching the same supply and demand: the
// decentralised market or one of the central baselines.
type Strategy struct {
	Name     string
	Outcomes []Outcome // one per job, in Demand.Jobs order
	Messages Traffic   // zero for central baselines: they send nothing
}

// Traffic is what a strategy put on the wire, counted by the transport.
type Traffic struct {
	Messages    int64 // quote requests, replies, awards, counter-signatures, vouchers
	Bytes       int64 // their encoded sizes
	GossipBytes int64 // offers and feed heads published, times the gossip fan-out
}

// checkGangs refuses a gang the simulator does not model: a gold one (a
// gang's reservation) or one of more than auction.MaxGangMembers. The
// demand CSV refuses them too; this guards demand built in code.
func (d *Demand) checkGangs() error {
	for i := range d.Jobs {
		j := &d.Jobs[i]
		switch {
		case j.Members < 0 || j.Members > auction.MaxGangMembers:
			return fmt.Errorf("job %s: members %d, expected 0..%d", j.ID, j.Members, auction.MaxGangMembers)
		case j.IsArray():
			return fmt.Errorf("job %s: an array of %d shards, not expanded into its shards (ExpandArrays)", j.ID, j.Shards)
		case j.Gang() && j.Tier == auction.Gold:
			return fmt.Errorf("job %s: a gang is silver or bronze (a gang's reservation is not modelled)", j.ID)
		}
	}
	return nil
}
