package attest

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

var t0 = time.UnixMilli(1_800_000_000_000)

const testUUID = "GPU-11111111-2222-3333-4444-555555555555"

func testKey(t testing.TB) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

func testGPU(simulated bool) GPU {
	return GPU{UUID: testUUID, Model: "RTX4090", VRAMMiB: 24564, VRAMFreeMiB: 4564,
		TempC: 70, PowerW: 400, PowerLimitW: 450, UtilPct: 95, Simulated: simulated}
}

var testNonce = []byte("renter-nonce-0001")

// pair returns a provider sampler and a renter verifier for one lease.
func pair(t testing.TB) (*Sampler, *Verifier, crypto.PrivKey) {
	t.Helper()
	k, id := testKey(t)
	s, err := NewSampler(k, "lease-1", testNonce, UUIDHash(testUUID))
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(id, "lease-1", testNonce)
	if err != nil {
		t.Fatal(err)
	}
	return s, v, k
}

func sign(t testing.TB, s *Sampler, i int) []byte {
	t.Helper()
	_, wire, err := s.Sign(testGPU(false), t0.Add(time.Duration(i)*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return wire
}

func TestGoodChainOf100(t *testing.T) {
	s, v, _ := pair(t)
	var got []*Sample
	for i := 1; i <= 100; i++ {
		smp, err := v.Accept(sign(t, s, i), t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if smp.Seq != uint64(i) || smp.MemUsedMiB != 20000 || smp.Simulated {
			t.Fatalf("sample %d: %+v", i, smp)
		}
		got = append(got, smp)
	}
	d := Summarise(got)
	seq, head := v.Head()
	if d.FromSeq != 1 || d.ToSeq != 100 || d.Count != 100 || seq != 100 || string(d.Last) != string(head) {
		t.Fatalf("digest %+v, head %d %x", d, seq, head)
	}
	if d.AvgUtil != 95 || d.MaxTemp != 70 || d.AvgPower != 400 || d.Simulated || d.Lease != "lease-1" {
		t.Fatalf("digest %+v", d)
	}
	if z := Summarise(nil); z.Count != 0 || z.Last != nil {
		t.Fatalf("empty digest %+v", z)
	}
}

func TestRejections(t *testing.T) {
	type tc struct {
		name string
		// prep signs whatever the case needs, feeding some to v, and
		// returns the bytes that must be refused.
		prep func(t *testing.T, s *Sampler, v *Verifier, k crypto.PrivKey) []byte
		want error
	}
	accept := func(t *testing.T, v *Verifier, raw []byte) {
		t.Helper()
		if _, err := v.Accept(raw, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []tc{
		{"forged by another key", func(t *testing.T, _ *Sampler, _ *Verifier, _ crypto.PrivKey) []byte {
			other, _ := testKey(t)
			f, _ := NewSampler(other, "lease-1", testNonce, UUIDHash(testUUID))
			return sign(t, f, 1)
		}, ErrSampleSig},
		{"tampered body", func(t *testing.T, s *Sampler, _ *Verifier, _ crypto.PrivKey) []byte {
			env, _, err := s.Sign(testGPU(false), t0)
			if err != nil {
				t.Fatal(err)
			}
			var smp Sample
			_ = telDec.Unmarshal(env.Body, &smp)
			smp.UtilPct = 100 // bill for more work than was done
			env.Body, _ = smp.Encode()
			raw, _ := env.Marshal()
			return raw
		}, ErrSampleSig},
		{"tampered signature", func(t *testing.T, s *Sampler, _ *Verifier, _ crypto.PrivKey) []byte {
			env, _, _ := s.Sign(testGPU(false), t0)
			env.Sig[0] ^= 1
			raw, _ := env.Marshal()
			return raw
		}, ErrSampleSig},
		{"replayed from another lease", func(t *testing.T, _ *Sampler, _ *Verifier, k crypto.PrivKey) []byte {
			o, _ := NewSampler(k, "lease-2", testNonce, UUIDHash(testUUID))
			return sign(t, o, 1)
		}, ErrWrongLease},
		{"replayed from another nonce", func(t *testing.T, _ *Sampler, _ *Verifier, k crypto.PrivKey) []byte {
			o, _ := NewSampler(k, "lease-1", []byte("another-nonce-99"), UUIDHash(testUUID))
			return sign(t, o, 1)
		}, ErrWrongNonce},
		{"repeated seq", func(t *testing.T, s *Sampler, v *Verifier, _ crypto.PrivKey) []byte {
			a := sign(t, s, 1)
			accept(t, v, a)
			accept(t, v, sign(t, s, 2))
			return a
		}, ErrReplayedSample},
		{"duplicate of the last", func(t *testing.T, s *Sampler, v *Verifier, _ crypto.PrivKey) []byte {
			a := sign(t, s, 1)
			accept(t, v, a)
			return a
		}, ErrReplayedSample},
		{"reordered", func(t *testing.T, s *Sampler, v *Verifier, _ crypto.PrivKey) []byte {
			accept(t, v, sign(t, s, 1))
			sign(t, s, 2)
			return sign(t, s, 3) // 3 arrives before 2
		}, ErrSampleGap},
		{"forked chain", func(t *testing.T, s *Sampler, v *Verifier, k crypto.PrivKey) []byte {
			accept(t, v, sign(t, s, 1))
			// A second chain by the same provider: seq 2 fits, prev does not.
			o, _ := NewSampler(k, "lease-1", testNonce, UUIDHash(testUUID))
			g := testGPU(false)
			g.UtilPct = 3 // a different history
			o.Sign(g, t0)
			return sign(t, o, 2)
		}, ErrBrokenChain},
		{"another GPU mid-chain", func(t *testing.T, s *Sampler, v *Verifier, k crypto.PrivKey) []byte {
			accept(t, v, sign(t, s, 1))
			o, _ := NewSampler(k, "lease-1", testNonce, UUIDHash("GPU-other"))
			g := testGPU(false)
			g.UUID = "GPU-other"
			o.Sign(g, t0)
			_, raw, _ := o.Sign(g, t0)
			return raw
		}, ErrWrongGPU},
		{"from the future", func(t *testing.T, s *Sampler, _ *Verifier, _ crypto.PrivKey) []byte {
			return sign(t, s, 3600+31) // verifier's now is t0+1h
		}, ErrSampleFuture},
		{"garbage", func(*testing.T, *Sampler, *Verifier, crypto.PrivKey) []byte {
			return []byte{0xa2, 0x01, 0xff}
		}, ErrSampleEncoding},
		{"oversized", func(*testing.T, *Sampler, *Verifier, crypto.PrivKey) []byte {
			return make([]byte, MaxSampleBytes+1)
		}, ErrSampleTooLarge},
		{"non-canonical envelope", func(t *testing.T, s *Sampler, _ *Verifier, _ crypto.PrivKey) []byte {
			env, _, _ := s.Sign(testGPU(false), t0)
			// Same content, map keys in the wrong order: decodable, but
			// not the one canonical form.
			sig, _ := telEnc.Marshal(env.Sig)
			body, _ := telEnc.Marshal(env.Body)
			raw := append([]byte{0xa2, 0x02}, sig...)
			return append(append(raw, 0x01), body...)
		}, ErrSampleEncoding},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, v, k := pair(t)
			raw := c.prep(t, s, v, k)
			seq, _ := v.Head()
			_, err := v.Accept(raw, t0.Add(time.Hour))
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if after, _ := v.Head(); after != seq {
				t.Fatalf("a refused sample moved the chain from %d to %d", seq, after)
			}
		})
	}
}

func TestTimeBackwardsRejected(t *testing.T) {
	s, v, k := pair(t)
	if _, err := v.Accept(sign(t, s, 10), t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Sign(testGPU(false), t0); !errors.Is(err, ErrTimeBackwards) {
		t.Fatalf("sampler signed a backwards clock: %v", err)
	}
	// A provider that bypasses its own Sampler's check is still caught.
	body, _ := (&Sample{Lease: "lease-1", GPU: UUIDHash(testUUID), Seq: 2, Prev: mustHead(v),
		Nonce: testNonce, Time: t0.UnixMilli(), UtilPct: 1}).Encode()
	sig, _ := k.Sign(telemetrySigned(body))
	raw, _ := (&SignedSample{Body: body, Sig: sig}).Marshal()
	if _, err := v.Accept(raw, t0.Add(time.Hour)); !errors.Is(err, ErrTimeBackwards) {
		t.Fatalf("got %v", err)
	}
}

func mustHead(v *Verifier) []byte { _, h := v.Head(); return h }

func TestSamplerRefusesOtherGPU(t *testing.T) {
	s, _, _ := pair(t)
	g := testGPU(false)
	g.UUID = "GPU-elsewhere"
	if _, _, err := s.Sign(g, t0); !errors.Is(err, ErrWrongGPU) || s.Seq() != 0 {
		t.Fatalf("got %v, seq %d", err, s.Seq())
	}
}

func TestSimulatedSampleNeverPassesAsReal(t *testing.T) {
	s, v, _ := pair(t)
	_, raw, err := s.Sign(testGPU(true), t0)
	if err != nil {
		t.Fatal(err)
	}
	smp, err := v.Accept(raw, t0)
	if err != nil || !smp.Simulated {
		t.Fatalf("simulated reading signed as %+v, %v", smp, err)
	}
	real := HardwareClaim{Model: "RTX4090", VRAMMiB: 24564, PowerLimitW: 450}
	if bad, why := Contradicts(real, smp); !bad || !strings.Contains(why, "simulated") {
		t.Fatalf("simulated sample against a real claim: %v %q", bad, why)
	}
	if !Summarise([]*Sample{smp}).Simulated {
		t.Fatal("digest of a simulated sample not marked simulated")
	}
}

func TestContradictionCaught(t *testing.T) {
	// Claims an RTX 4090 but the telemetry is an H100's.
	claim := HardwareClaim{Model: "RTX4090", VRAMMiB: 24564}
	s, v, _ := pair(t)
	h100 := testGPU(false)
	h100.VRAMMiB, h100.VRAMFreeMiB, h100.PowerW = 81559, 1559, 690
	_, raw, err := s.Sign(h100, t0)
	if err != nil {
		t.Fatal(err)
	}
	smp, err := v.Accept(raw, t0)
	if err != nil {
		t.Fatal(err)
	}
	if bad, why := Contradicts(claim, smp); !bad || !strings.Contains(why, "memory") {
		t.Fatalf("memory contradiction missed: %v %q", bad, why)
	}
	smp.MemUsedMiB = 20000
	if bad, why := Contradicts(claim, smp); !bad || !strings.Contains(why, "450 W") {
		t.Fatalf("power far over the model's stock limit missed: %v %q", bad, why)
	}
	smp.PowerW = 600 // an owner-raised limit on a real 4090
	if bad, why := Contradicts(claim, smp); bad {
		t.Fatalf("honest raised power limit flagged: %q", why)
	}
	lowered := claim
	lowered.PowerLimitW = 300 // claimed while the owner had lowered it
	if bad, why := Contradicts(lowered, smp); bad {
		t.Fatalf("a limit raised back after the claim flagged: %q", why)
	}
	if bad, why := Contradicts(HardwareClaim{Model: "H100", Simulated: true}, smp); !bad {
		t.Fatalf("real sample against a simulated claim not flagged: %q", why)
	}
}

func TestNewVerifierRejectsBadInput(t *testing.T) {
	_, id := testKey(t)
	if _, err := NewVerifier(id, "", testNonce); err == nil {
		t.Fatal("empty lease accepted")
	}
	if _, err := NewVerifier(id, "l", []byte("short")); err == nil {
		t.Fatal("short nonce accepted")
	}
	if _, err := NewVerifier(peer.ID("nonsense"), "l", testNonce); err == nil {
		t.Fatal("peer ID without a key accepted")
	}
}
