package attest

import (
	"bytes"
	"testing"
	"time"
)

// FuzzDecodeSignedSample feeds hostile bytes to the decoder and to a
// Verifier: nothing may panic, and whatever decodes must be the one
// canonical, valid form of itself.
func FuzzDecodeSignedSample(f *testing.F) {
	s, v, _ := pair(f)
	for i := 1; i <= 3; i++ {
		f.Add(sign(f, s, i))
	}
	f.Add([]byte{})
	f.Add([]byte{0xa2, 0x01, 0x40, 0x02, 0x40})
	f.Add([]byte{0xbf, 0x01, 0x40, 0xff})
	f.Fuzz(func(t *testing.T, raw []byte) {
		smp, env, err := DecodeSignedSample(raw)
		if _, aerr := v.Accept(raw, t0.Add(time.Hour)); aerr == nil && err != nil {
			t.Fatalf("verifier accepted what the decoder refused: %v", err)
		}
		if err != nil {
			return
		}
		if err := smp.Validate(); err != nil {
			t.Fatalf("decoded an invalid sample: %v", err)
		}
		again, err := env.Marshal()
		if err != nil || !bytes.Equal(again, raw) {
			t.Fatalf("decoded a non-canonical envelope (%v)", err)
		}
		body, err := smp.Encode()
		if err != nil || !bytes.Equal(body, env.Body) {
			t.Fatalf("decoded a non-canonical body (%v)", err)
		}
	})
}

func BenchmarkSignSample(b *testing.B) {
	s, _, _ := pair(b)
	g := testGPU(false)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, _, err := s.Sign(g, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifySample(b *testing.B) {
	// Sign the chain up front so only verification is timed; each
	// iteration accepts the next sample of one long chain.
	s, v, _ := pair(b)
	g := testGPU(false)
	wires := make([][]byte, b.N)
	for i := range wires {
		_, w, err := s.Sign(g, t0.Add(time.Duration(i)*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		wires[i] = w
	}
	now := t0.Add(time.Duration(b.N) * time.Millisecond)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := v.Accept(wires[i], now); err != nil {
			b.Fatal(err)
		}
	}
}
