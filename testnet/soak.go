package testnet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gleaner-net/gleaner/node/renting"
)

// The fault soak: daemons in containers on private Docker networks, renters
// submitting a steady stream of silver and bronze jobs, while a seeded
// schedule kills (kill -9) and restarts providers and renters, stops
// providers cleanly and partitions and heals the networks. At the end it
// checks what must hold whatever happened (see soakCheck) and measures how
// the market recovered (SoakReport).

// SoakOptions configure RunSoak.
type SoakOptions struct {
	ModuleRoot string        // the checkout the image is built from
	Duration   time.Duration // how long jobs are submitted and faults injected
	Seed       uint64        // the same seed gives the same fault schedule and load
	Providers  int           // default 5, two simulated GPUs each
	Renters    int           // default 3
	// Logf reports progress (a test's t.Logf); nil is quiet.
	Logf func(format string, args ...any)
}

func (o *SoakOptions) defaults() error {
	if o.Providers == 0 {
		o.Providers = 5
	}
	if o.Renters == 0 {
		o.Renters = 3
	}
	if o.Providers < 2 || o.Renters < 1 {
		return fmt.Errorf("soak: %d providers and %d renters: want at least 2 providers and 1 renter", o.Providers, o.Renters)
	}
	if o.Duration < 30*time.Second {
		return fmt.Errorf("soak: duration %v: at least 30s, so that faults have jobs to hit", o.Duration)
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// soakSpecs are the jobs renters submit: the demo workload, run by each
// provider's process executor inside its container (there is no Docker in
// there), short and long, silver and bronze, each auctioned again up to
// three times when its provider is lost or preempts it.
var soakSpecs = map[string]string{
	"/soak-silver-short.yaml": soakSpec("silver", "2s", 2),
	"/soak-silver-long.yaml":  soakSpec("silver", "4s", 3),
	"/soak-bronze-short.yaml": soakSpec("bronze", "2s", 2),
	"/soak-bronze-long.yaml":  soakSpec("bronze", "5s", 3),
}

func soakSpec(tier, sleep string, lines int) string {
	return fmt.Sprintf(`name: soak-%s
image: %s
command: ["/demojob", "-sleep", "%s", "-lines", "%d"]
resources: {gpus: 1}
tier: %s
max_price: 1.00
duration: {expected: 30s, max: 3m}
retry: {max_reauctions: 3}
allow_simulated: true
`, tier, DemoImage, sleep, lines, tier)
}

// soakNode is one daemon of the soak and whether it is up.
type soakNode struct {
	*DockerNode
	renter bool
	up     atomic.Bool
	busy   sync.Mutex // one fault at a time on a node
}

// soak is one run's state.
type soak struct {
	opts    SoakOptions
	d       *DockerNet
	netA    string
	netB    string
	nodes   []*soakNode // providers first, then renters
	bridges []*soakNode // on both networks while whole
	t0      time.Time

	cutting sync.Mutex // held by a partition from its cut to its heal's measure

	mu   sync.Mutex
	jobs map[string]*soakJob // by "renter/jobID"
	rep  SoakReport
}

// soakJob is what the observer saw of one submitted job (kept by
// "renter/jobID").
type soakJob struct {
	state    string
	provider string // where it last ran
	errText  string
	// displaced: when its provider was killed or stopped while it ran
	// there (zero if not); from: that provider.
	displaced time.Time
	from      string
}

// RunSoak runs one soak and returns its report; an error means the soak
// could not run (no Docker, a build failure), not that a check failed:
// those are the report's Violations.
func RunSoak(ctx context.Context, opts SoakOptions) (*SoakReport, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	d, err := NewDockerNet(ctx, opts.ModuleRoot, DockerNetOptions{Files: soakSpecs})
	if err != nil {
		return nil, err
	}
	s := &soak{opts: opts, d: d, jobs: map[string]*soakJob{}}
	s.rep.Seed, s.rep.Duration = opts.Seed, opts.Duration.String()
	report, runErr := s.run(ctx)
	// Close before the leftovers check: what Close cannot remove leaked.
	closeErr := d.Close()
	lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left, lerr := d.Leftovers(lctx)
	if report != nil {
		if runErr != nil {
			report.violate("the soak did not finish, so its end checks did not run: %v", runErr)
		}
		for _, l := range left {
			report.violate("left on the Docker engine after the soak: %s", l)
		}
		if closeErr != nil {
			report.violate("removing the soak's containers and networks: %v", closeErr)
		}
	}
	return report, errors.Join(runErr, lerr)
}

func (s *soak) run(ctx context.Context) (*SoakReport, error) {
	if err := s.setup(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if s.rep.Failed() {
			for _, n := range s.nodes {
				s.opts.Logf("--- %s (%s) ---\n%s", n.Name, n.PeerID, s.d.Logs(n.DockerNode, 30))
			}
		}
	}()
	s.t0 = time.Now()
	schedule := soakSchedule(s.opts.Seed, s.opts.Duration, s.providers(), s.renters())
	s.rep.Faults = len(schedule)
	faultCtx, stopFaults := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.applySchedule(faultCtx, schedule) }()
	go func() { defer wg.Done(); s.submitLoad(faultCtx) }()
	go func() { defer wg.Done(); s.observe(faultCtx) }()
	select {
	case <-ctx.Done():
	case <-time.After(s.opts.Duration):
	}
	stopFaults()
	wg.Wait()
	if ctx.Err() != nil {
		return &s.rep, ctx.Err()
	}
	s.opts.Logf("soak: %v of faults and load done; healing and waiting for every job to end", s.opts.Duration)
	if err := s.wholeAgain(ctx); err != nil {
		return &s.rep, err
	}
	s.check(ctx)
	return &s.rep, nil
}

// setup starts the daemons: providers and renters alternate between the
// two networks, and the first provider and the first renter (the bridges)
// are on both, so the testnet starts whole and a partition is the bridges
// unplugged from B.
func (s *soak) setup(ctx context.Context) error {
	var err error
	if s.netA, err = s.d.AddNetwork(ctx, "a"); err != nil {
		return err
	}
	if s.netB, err = s.d.AddNetwork(ctx, "b"); err != nil {
		return err
	}
	total := s.opts.Providers + s.opts.Renters
	s.nodes = make([]*soakNode, total)
	t0 := time.Now()
	err = parallelErr(total, func(i int) error {
		renter := i >= s.opts.Providers
		name, net := fmt.Sprintf("p%d", i+1), s.netA
		if renter {
			name = fmt.Sprintf("r%d", i-s.opts.Providers+1)
		}
		if i%2 == 1 {
			net = s.netB
		}
		var extra []string
		if !renter {
			extra = []string{"--simulate-gpus", "2xRTX4090"}
		}
		n, err := s.d.Start(ctx, name, net, extra...)
		if err != nil {
			return err
		}
		sn := &soakNode{DockerNode: n, renter: renter}
		sn.up.Store(true)
		s.nodes[i] = sn
		if !renter {
			_, err = s.d.Gleaner(ctx, n, "offer", "set", "--region", "eu/DE", "--price.bronze", "0.4", "--price.silver", "0.7")
		}
		return err
	})
	if err != nil {
		return err
	}
	s.bridges = []*soakNode{s.nodes[0], s.nodes[s.opts.Providers]}
	for _, b := range s.bridges {
		other := s.netB
		if b.Net == s.netB {
			other = s.netA
		}
		if err := s.d.Attach(ctx, b.DockerNode, other); err != nil {
			return err
		}
	}
	// Each node dials a bridge that shares its network: the DHT and the
	// gossip mesh find the rest. Known peers persist in each repo, so a
	// restarted node finds the mesh again on its own.
	err = parallelErr(total, func(i int) error {
		n := s.nodes[i]
		for _, b := range s.bridges {
			if b != n {
				if err := s.d.Connect(ctx, n.DockerNode, s.addrOn(ctx, b, n.Net)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	s.opts.Logf("soak: %d daemons ready and connected in %v", total, time.Since(t0).Round(time.Millisecond))
	return err
}

// addrOn is n's address on network (a bridge has one on each).
func (s *soak) addrOn(ctx context.Context, n *soakNode, network string) *DockerNode {
	ip, err := s.d.IP(ctx, n.DockerNode, network)
	if err != nil {
		return n.DockerNode
	}
	return &DockerNode{Name: n.Name, PeerID: n.PeerID, Addr: fmt.Sprintf("/ip4/%s/tcp/%d/p2p/%s", ip, dockerP2PPort, n.PeerID)}
}

func (s *soak) providers() []*soakNode { return s.nodes[:s.opts.Providers] }
func (s *soak) renters() []*soakNode   { return s.nodes[s.opts.Providers:] }

// submitLoad has every renter submit a job every 3 to 7 s (seeded) while
// it is up, until ctx ends.
func (s *soak) submitLoad(ctx context.Context) {
	specs := []string{"/soak-silver-short.yaml", "/soak-silver-long.yaml", "/soak-bronze-short.yaml", "/soak-bronze-long.yaml"}
	var wg sync.WaitGroup
	for i, r := range s.renters() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(s.opts.Seed, uint64(1000+i)))
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(3*time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))):
				}
				spec := specs[rng.IntN(len(specs))]
				if !r.up.Load() {
					continue
				}
				var j renting.JobRecord
				if err := s.d.Call(ctx, r.DockerNode, &j, "job", "submit", spec); err != nil {
					s.note(func(rep *SoakReport) { rep.SubmitRefused++ }) // the renter went down meanwhile
					continue
				}
				s.mu.Lock()
				s.jobs[r.Name+"/"+j.ID] = &soakJob{state: j.State}
				s.rep.Submitted++
				s.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// observe polls every renter's jobs every 2 s and notes where each runs
// and when one displaced by a fault runs again elsewhere.
func (s *soak) observe(ctx context.Context) {
	for {
		for _, r := range s.renters() {
			if r.up.Load() {
				s.observeRenter(ctx, r)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

func (s *soak) observeRenter(ctx context.Context, r *soakNode) {
	var jobs []renting.JobRecord
	if err := s.d.Call(ctx, r.DockerNode, &jobs, "job", "ls"); err != nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range jobs {
		sj := s.jobs[r.Name+"/"+j.ID]
		if sj == nil {
			continue // a canary, or submitted as the poll ran
		}
		sj.state, sj.errText = j.State, j.Error
		// Seen running on another provider, or already done there (a
		// short job can run and end between two polls: then the time is
		// an upper bound, by at most a poll).
		if (j.State == renting.StateRunning || j.State == renting.StateCompleted) && !sj.displaced.IsZero() && j.Provider != sj.from {
			s.rep.recovered(now.Sub(sj.displaced))
			sj.displaced = time.Time{}
		}
		if j.State == renting.StateRunning {
			sj.provider = j.Provider
		}
	}
}

// displace marks the jobs last seen running on provider as hit by a fault
// at t: the time until each runs elsewhere is the recovery measured.
func (s *soak) displace(provider string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.jobs {
		if j.state == renting.StateRunning && j.provider == provider && j.displaced.IsZero() {
			j.displaced, j.from = t, provider
			s.rep.Displaced++
		}
	}
}

func (s *soak) note(f func(*SoakReport)) {
	s.mu.Lock()
	f(&s.rep)
	s.mu.Unlock()
}

// parallelErr runs f(0..n-1) at once and joins their errors.
func parallelErr(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(i) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
