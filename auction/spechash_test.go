package auction

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestSpecHashNamesTheContentNotTheWriting: the same spec written two
// ways hashes the same; any change a provider would run differently
// (image, command, env, resources, workload) hashes differently.
func TestSpecHashNamesTheContentNotTheWriting(t *testing.T) {
	a := "name: t\nimage: img:1\ncommand: [run, \"--fast\"]\nenv: {B: \"2\", A: \"1\"}\nresources: {gpus: 1}\ntier: bronze\nmax_price: 1.0\nduration: {expected: 1m, max: 5m}\n"
	b := "# the same, written otherwise\nname: t\nimage:   img:1\ncommand:\n  - run\n  - --fast\nenv:\n  A: \"1\"\n  B: \"2\"\nresources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 5m, expected: 1m}\n"
	hash := func(y string) []byte {
		t.Helper()
		s, err := ParseJobSpec([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		h, err := SpecHash(s)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != SpecHashLen {
			t.Fatalf("hash of %d bytes", len(h))
		}
		return h
	}
	if !bytes.Equal(hash(a), hash(b)) {
		t.Fatal("one spec written two ways hashes differently")
	}
	for _, change := range [][2]string{
		{"image: img:1", "image: rt-evil:1"},
		{"command: [run, \"--fast\"]", "command: [run, \"--slow\"]"},
		{"env: {B: \"2\", A: \"1\"}", "env: {B: \"2\", A: \"1\", C: \"3\"}"},
		{"resources: {gpus: 1}", "resources: {gpus: 1, memory_gb: 64000}"},
		{"duration: {expected: 1m, max: 5m}", "duration: {expected: 1m, max: 700h}"},
		{"tier: bronze", "tier: bronze\nworkload: service"},
	} {
		changed := strings.Replace(a, change[0], change[1], 1)
		if changed == a {
			t.Fatalf("the change %q did not apply", change)
		}
		if bytes.Equal(hash(a), hash(changed)) {
			t.Errorf("%q -> %q: same hash", change[0], change[1])
		}
	}
}

// TestQuoteStatesTheProvidersTerms: a bid names the spec it quoted and the
// window and notice the provider will honour, so that a lease can be held
// to them.
func TestQuoteStatesTheProvidersTerms(t *testing.T) {
	o := validOffer(fakeID(1), t0)
	o.Prices.Gold = 2_500_000
	spec := baseSpec()
	bid, d := (&BidEngine{}).Quote(spec, o, 0, t0)
	if d != nil {
		t.Fatal(d.Reason)
	}
	want, _ := SpecHash(spec)
	if !bytes.Equal(bid.SpecHash, want) || bid.Start != t0.Unix() || bid.DurationSec != int64(spec.Duration.Max/time.Second) || bid.NoticeSec != o.Policy.PreemptNotice {
		t.Fatalf("bronze bid terms %+v", bid)
	}
	spec.Tier, spec.Start, spec.MaxPrice = Gold, t0.Add(20*time.Hour), 3_000_000
	if bid, d = (&BidEngine{}).Quote(spec, o, 1, t0); d != nil || bid.Start != spec.Start.Unix() {
		t.Fatalf("gold bid %+v %v: want its start at the reservation's", bid, d)
	}
}

func TestBidTermsAreValidated(t *testing.T) {
	key, id := testKey(t, 1)
	for _, c := range []struct {
		name string
		edit func(*Bid)
	}{
		{"short spec hash", func(b *Bid) { b.SpecHash = []byte{1, 2, 3} }},
		{"negative duration", func(b *Bid) { b.DurationSec = -1 }},
		{"duration past the longest job", func(b *Bid) { b.DurationSec = int64(MaxJobDuration/time.Second) + 1 }},
		{"a day of notice", func(b *Bid) { b.NoticeSec = 86400 }},
		{"negative start", func(b *Bid) { b.Start = -5 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := Bid{Provider: id, JobID: "j", Tier: Bronze, Price: 1, GPUs: 1, ValidUntil: t0.Unix() + 60, Nonce: make([]byte, 8),
				SpecHash: make([]byte, SpecHashLen), Start: t0.Unix(), DurationSec: 300, NoticeSec: 60}
			if _, err := SignBid(&b, key); err != nil {
				t.Fatalf("the valid bid: %v", err)
			}
			c.edit(&b)
			if _, err := SignBid(&b, key); err == nil {
				t.Fatal("signed")
			}
		})
	}
}

// TestSpecsCannotSetTheExecutorsVariables: GLEANER_* names are what the
// provider tells a job (simulated GPUs, UUIDs, checkpoint path); a spec
// that sets one is refused where it is written, not after a paid lease.
func TestSpecsCannotSetTheExecutorsVariables(t *testing.T) {
	y := "name: t\nimage: img:1\nenv: {GLEANER_SIMULATED_GPUS: \"0\"}\nresources: {gpus: 1}\ntier: bronze\nmax_price: 1.0\nduration: {expected: 1m, max: 5m}\n"
	_, err := ParseJobSpec([]byte(y))
	if err == nil || !strings.Contains(err.Error(), "reserved") || !strings.Contains(err.Error(), "env.GLEANER_SIMULATED_GPUS") {
		t.Fatalf("got %v, want env.GLEANER_SIMULATED_GPUS refused as reserved", err)
	}
}

// TestStartAllowedSeesTheOwnersPolicyNow: the provider's second look at a
// quoted spec refuses what the owner no longer allows.
func TestStartAllowedSeesTheOwnersPolicyNow(t *testing.T) {
	o := validOffer(fakeID(1), t0)
	spec := baseSpec()
	if why := StartAllowed(spec, o); why != "" {
		t.Fatalf("the quoted spec: %s", why)
	}
	o.Policy.Images = []string{"registry.example/other/*"}
	if why := StartAllowed(spec, o); why != ReasonImage {
		t.Fatalf("image dropped from the allowlist: %q", why)
	}
	o = validOffer(fakeID(1), t0)
	spec.Resources.MemoryGB = 64_000
	if why := StartAllowed(spec, o); why != ReasonMemory {
		t.Fatalf("64 TB of memory: %q", why)
	}
	spec = baseSpec()
	spec.Workload = "service"
	if why := StartAllowed(spec, o); why != ReasonWorkload {
		t.Fatalf("a service on a batch-only machine: %q", why)
	}
	if why := StartAllowed(baseSpec(), nil); why != ReasonWithdrawn {
		t.Fatalf("no offer: %q", why)
	}
}

// BenchmarkStartSpecCheck is the provider's cost of admitting a start:
// parse the spec sent, hash it, compare with the lease, and check the
// owner's policy again.
func BenchmarkStartSpecCheck(b *testing.B) {
	y := []byte("name: t\nimage: registry.example/team/train:1.4\ncommand: [python, train.py, --epochs, \"3\"]\nenv: {EPOCHS: \"3\", LR: \"0.001\"}\n" +
		"resources: {gpus: 2, min_vram_gb: 80, models: [H100], cpus: 8, memory_gb: 32}\ntier: bronze\nmax_price: 1.5\n" +
		"duration: {expected: 2h, max: 4h}\nplacement: {regions: [eu]}\nallow_simulated: true\n")
	spec, err := ParseJobSpec(y)
	if err != nil {
		b.Fatal(err)
	}
	want, _ := SpecHash(spec)
	o := validOffer(fakeID(1), t0)
	b.ReportAllocs()
	for b.Loop() {
		s, err := ParseJobSpec(y)
		if err != nil {
			b.Fatal(err)
		}
		h, err := SpecHash(s)
		if err != nil || !bytes.Equal(h, want) {
			b.Fatal("hash differs")
		}
		if why := StartAllowed(s, o); why != "" {
			b.Fatal(why)
		}
	}
}
