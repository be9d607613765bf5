package auction

import (
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"
)

// baseSpec runs on validOffer at t0 (2 simulated H100s in DE, bronze 1.2,
// silver 2.0, windows [t0, t0+8h) and [t0+20h, t0+30h)).
func baseSpec() *JobSpec {
	return &JobSpec{
		Name: "t", Image: "registry.example/team/train:1.4",
		Resources: Resources{GPUs: 2, MinVRAMGB: 80, Models: []string{"H100"}, CPUs: 8, MemoryGB: 32},
		Tier:      Bronze, MaxPrice: 1_500_000,
		Duration:  JobDuration{Expected: 2 * time.Hour, Max: 4 * time.Hour},
		Placement: Placement{Regions: []string{"eu"}},
		Workload:  "batch", AllowSimulated: true,
	}
}

// fixedRTT is a fake peerstore: providers it lists are measured.
type fixedRTT map[string]time.Duration

func (f fixedRTT) rtt(p string) (time.Duration, bool) { d, ok := f[p]; return d, ok }

func TestCheckers(t *testing.T) {
	id := fakeID(1)
	h := func(n int) time.Duration { return time.Duration(n) * time.Hour }
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, c := range []struct {
		name   string
		spec   func(*JobSpec)
		offer  func(*Offer)
		now    time.Time
		rtt    fixedRTT
		check  string
		reason string
	}{
		{name: "base is feasible"},
		{name: "withdrawn", offer: func(o *Offer) { o.Withdrawn = true }, check: CheckLive, reason: ReasonWithdrawn},
		{name: "expired at expiry", now: at(h(1)), check: CheckLive, reason: ReasonExpired},
		{name: "gold not offered", spec: func(s *JobSpec) { s.Tier, s.Start = Gold, at(h(1)) }, check: CheckTier, reason: ReasonTierNotOffered},
		{name: "floor above max", spec: func(s *JobSpec) { s.MaxPrice = 1_199_999 }, check: CheckPrice, reason: ReasonFloorAboveMax},
		{name: "floor equals max", spec: func(s *JobSpec) { s.MaxPrice = 1_200_000 }},
		{name: "simulated refused", spec: func(s *JobSpec) { s.AllowSimulated = false }, check: CheckSimulated, reason: ReasonSimulated},
		{name: "real GPUs without allow_simulated", spec: func(s *JobSpec) { s.AllowSimulated = false },
			offer: func(o *Offer) { o.GPUs[0].Simulated, o.GPUs[1].Simulated = false, false }},
		{name: "other continent", spec: func(s *JobSpec) { s.Placement.Regions = []string{"na", "as"} }, check: CheckRegion, reason: ReasonRegion},
		{name: "any continent", spec: func(s *JobSpec) { s.Placement.Regions = nil }},
		{name: "country denied", spec: func(s *JobSpec) { s.Placement.DenyCountries = []string{"FR", "DE"} }, check: CheckCountry, reason: ReasonCountryDenied},
		{name: "other country denied", spec: func(s *JobSpec) { s.Placement.DenyCountries = []string{"FR"} }},
		{name: "too few GPUs", spec: func(s *JobSpec) { s.Resources.GPUs = 3 }, check: CheckGPUs, reason: ReasonTooFewGPUs},
		{name: "no accepted model", spec: func(s *JobSpec) { s.Resources.Models = []string{"A100-80GB"} }, check: CheckGPUs, reason: ReasonNoModel},
		{name: "model case-insensitive", spec: func(s *JobSpec) { s.Resources.Models = []string{"h100"} }},
		{name: "any model", spec: func(s *JobSpec) { s.Resources.Models = nil }},
		// 81559 MiB is 85.5e9 bytes: an "80 GB" card passes 85 GB, not 86.
		{name: "vram in GB of 10^9 bytes", spec: func(s *JobSpec) { s.Resources.MinVRAMGB = 85 }},
		{name: "not enough vram", spec: func(s *JobSpec) { s.Resources.MinVRAMGB = 86 }, check: CheckGPUs, reason: ReasonVRAM},
		{name: "mixed GPUs, one fits", spec: func(s *JobSpec) { s.Resources.Models = []string{"H100", "RTX4090"} },
			offer: func(o *Offer) { o.GPUs[1] = GPU{Model: "RTX4090", VRAMMiB: 24564, ComputeCap: "8.9"} }, check: CheckGPUs, reason: ReasonTooFewMatching},
		{name: "too few CPUs", spec: func(s *JobSpec) { s.Resources.CPUs = 33 }, check: CheckHost, reason: ReasonCPUs},
		{name: "memory fits", spec: func(s *JobSpec) { s.Resources.MemoryGB = 274 }}, // 256 GiB = 274.9e9 bytes
		{name: "too little memory", spec: func(s *JobSpec) { s.Resources.MemoryGB = 275 }, check: CheckHost, reason: ReasonMemory},
		{name: "workload", spec: func(s *JobSpec) { s.Workload = "service" }, check: CheckPolicy, reason: ReasonWorkload},
		{name: "policy max duration", offer: func(o *Offer) { o.Policy.MaxDurationSec = 3600 }, check: CheckPolicy, reason: ReasonPolicyDuration},
		{name: "policy max duration equal", offer: func(o *Offer) { o.Policy.MaxDurationSec = 4 * 3600 }},
		{name: "image not allowed", offer: func(o *Offer) { o.Policy.Images = []string{"docker.io/library/*"} }, check: CheckPolicy, reason: ReasonImage},
		{name: "image allowed", offer: func(o *Offer) { o.Policy.Images = []string{"other/*", "registry.example/team/*"} }},
		{name: "bronze outside windows", now: at(h(10)), offer: func(o *Offer) { o.ExpiresAt = t0.Unix() + 86400 },
			check: CheckCalendar, reason: ReasonNotAvailableNow},
		{name: "bronze at the last second", now: at(h(8) - time.Second), offer: func(o *Offer) { o.ExpiresAt = t0.Unix() + 86400 }},
		{name: "silver fits the window exactly", spec: func(s *JobSpec) { s.Tier, s.MaxPrice, s.Duration.Max = Silver, 2_000_000, h(8) }},
		{name: "silver longer than the window", spec: func(s *JobSpec) { s.Tier, s.MaxPrice, s.Duration.Max = Silver, 2_000_000, h(8)+time.Second },
			check: CheckCalendar, reason: ReasonWindowTooShort},
		{name: "silver across touching windows", spec: func(s *JobSpec) { s.Tier, s.MaxPrice, s.Duration.Max = Silver, 2_000_000, h(9) },
			offer: func(o *Offer) {
				o.Windows = []Window{{t0.Unix(), t0.Unix() + 3600}, {t0.Unix() + 3600, t0.Unix() + 9*3600}}
			}},
		{name: "silver not available now", now: at(h(10)), spec: func(s *JobSpec) { s.Tier, s.MaxPrice = Silver, 2_000_000 },
			offer: func(o *Offer) { o.ExpiresAt = t0.Unix() + 86400 }, check: CheckCalendar, reason: ReasonNotAvailableNow},
		{name: "gold reserved window", spec: goldAt(at(h(20)), h(10)), offer: sellGold},
		{name: "gold longer than the window", spec: goldAt(at(h(20)), h(10)+time.Second), offer: sellGold, check: CheckCalendar, reason: ReasonNotReserved},
		{name: "gold in a gap", spec: goldAt(at(h(9)), h(1)), offer: sellGold, check: CheckCalendar, reason: ReasonNotReserved},
		{name: "gold start passed", spec: goldAt(at(-time.Second), h(1)), offer: sellGold, check: CheckCalendar, reason: ReasonStartPassed},
		{name: "rtt above max", spec: func(s *JobSpec) { s.Placement.MaxRTT = 80 * time.Millisecond },
			rtt: fixedRTT{id: 81 * time.Millisecond}, check: CheckRTT, reason: ReasonRTT},
		{name: "rtt at max", spec: func(s *JobSpec) { s.Placement.MaxRTT = 80 * time.Millisecond }, rtt: fixedRTT{id: 80 * time.Millisecond}},
		{name: "rtt unmeasured passes", spec: func(s *JobSpec) { s.Placement.MaxRTT = 80 * time.Millisecond }, rtt: fixedRTT{}},
		{name: "rtt without a limit", rtt: fixedRTT{id: time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, o := baseSpec(), validOffer(id, t0)
			if c.spec != nil {
				c.spec(spec)
			}
			if c.offer != nil {
				c.offer(o)
			}
			env := Env{Now: c.now, RTT: c.rtt.rtt}
			if env.Now.IsZero() {
				env.Now = t0
			}
			if err := o.Validate(); err != nil {
				t.Fatalf("test offer invalid: %v", err)
			}
			ok, rej := Feasible(spec, []*Offer{o}, env)
			if c.check == "" {
				if len(ok) != 1 || len(rej) != 0 {
					t.Fatalf("rejected: %+v", rej)
				}
				return
			}
			want := Rejection{Provider: id, Check: c.check, Reason: c.reason}
			if len(ok) != 0 || len(rej) != 1 || !reflect.DeepEqual(rej[0], want) {
				t.Fatalf("got ok=%d %+v, want %+v", len(ok), rej, want)
			}
		})
	}
}

func sellGold(o *Offer) { o.Prices.Gold = 2_500_000 }

func goldAt(start time.Time, max time.Duration) func(*JobSpec) {
	return func(s *JobSpec) { s.Tier, s.Start, s.Duration.Max, s.MaxPrice = Gold, start, max, 3_000_000 }
}

// TestFunnel checks the funnel's contract on random offers: every offer is
// either returned or rejected once; a rejected offer fails the check it is
// charged to and passes every check before it; Funnel's counts add up.
func TestFunnel(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	offers := make([]*Offer, 5000)
	for i := range offers {
		offers[i] = randomOffer(r, fakeID(uint64(i)), t0.Unix())
		offers[i].Withdrawn = r.Intn(50) == 0
	}
	spec := baseSpec()
	spec.Resources = Resources{GPUs: 1, MinVRAMGB: 24, Models: []string{"H100", "RTX4090", "A100-80GB", "L40S"}, CPUs: 2, MemoryGB: 16}
	spec.Placement = Placement{Regions: []string{"eu", "na"}, DenyCountries: []string{"CA"}, MaxRTT: 80 * time.Millisecond}
	spec.AllowSimulated, spec.MaxPrice = false, 3_500_000
	rtts := fixedRTT{}
	for i := 0; i < len(offers); i += 2 {
		rtts[offers[i].Provider] = time.Duration(r.Intn(200)) * time.Millisecond
	}
	env := Env{Now: t0.Add(5 * time.Minute), RTT: rtts.rtt}
	ok, rej := Feasible(spec, offers, env)
	if len(ok)+len(rej) != len(offers) || len(ok) == 0 {
		t.Fatalf("%d ok + %d rejected != %d offers", len(ok), len(rej), len(offers))
	}
	m := newMatcher(spec, env)
	checks := map[string]func(*Offer) string{CheckLive: m.live, CheckTier: m.tier, CheckPrice: m.price,
		CheckSimulated: m.simulated, CheckRegion: m.region, CheckCountry: m.country, CheckGPUs: m.gpus,
		CheckHost: m.host, CheckPolicy: m.policy, CheckCalendar: m.calendar, CheckRTT: m.rtt}
	byProv := map[string]*Offer{}
	for _, o := range offers {
		byProv[o.Provider] = o
	}
	for _, rj := range rej {
		o := byProv[rj.Provider]
		for _, name := range FeasibilityChecks {
			got := checks[name](o)
			if name == rj.Check {
				if got != rj.Reason {
					t.Fatalf("%s: charged to %s (%s) but the check says %q", rj.Provider, name, rj.Reason, got)
				}
				break
			}
			if got != "" {
				t.Fatalf("%s: charged to %s but already fails %s", rj.Provider, rj.Check, name)
			}
		}
	}
	for _, o := range ok {
		for _, name := range FeasibilityChecks {
			if got := checks[name](o); got != "" {
				t.Fatalf("%s returned but fails %s: %s", o.Provider, name, got)
			}
		}
	}
	total := 0
	for _, s := range Funnel(rej) {
		total += s.Removed
		if s.Removed == 0 {
			t.Errorf("check %s removed nothing: the random book no longer exercises it", s.Check)
		}
	}
	if total != len(rej) {
		t.Fatalf("funnel counts %d, rejected %d", total, len(rej))
	}
	t.Logf("%d offers -> %d feasible; funnel %+v", len(offers), len(ok), Funnel(rej))
}

// TestFeasibleParallel: splitting a large book among workers returns
// exactly what one stack over the whole book does, in the same order.
func TestFeasibleParallel(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	offers := make([]*Offer, 3*parallelMin+17)
	for i := range offers {
		offers[i] = randomOffer(r, fakeID(uint64(i)), t0.Unix())
	}
	spec := baseSpec()
	spec.Resources, spec.Placement, spec.MaxPrice = Resources{GPUs: 1}, Placement{}, 3_000_000
	env := Env{Now: t0, RTT: fixedRTT{}.rtt}
	ok, rej := Feasible(spec, offers, env)
	var wantRej []Rejection
	var wantOK []*Offer
	it := newFeasibilityStack(spec, env, &sliceIterator{offers: offers}, &wantRej)
	for o := it.Next(); o != nil; o = it.Next() {
		wantOK = append(wantOK, o)
	}
	if len(wantOK) == 0 || !slices.Equal(ok, wantOK) || !reflect.DeepEqual(rej, wantRej) {
		t.Fatalf("parallel: %d ok %d rejected; sequential: %d ok %d rejected", len(ok), len(rej), len(wantOK), len(wantRej))
	}
}
