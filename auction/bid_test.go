package auction

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func testBid(provider string) *Bid {
	return &Bid{Provider: provider, JobID: "bafyjob-1", Tier: Bronze, Price: 1_200_000, GPUs: 2,
		ValidUntil: t0.Unix() + 120, Nonce: []byte("0123456789abcdef")}
}

func signedBidWire(t testing.TB) []byte {
	key, id := testKey(t, 3)
	s, err := SignBid(testBid(id), key)
	if err != nil {
		t.Fatal(err)
	}
	wire, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return wire
}

func TestSignedBidRoundTrip(t *testing.T) {
	wire := signedBidWire(t)
	b, s, err := DecodeSignedBid(wire, t0)
	if err != nil {
		t.Fatal(err)
	}
	_, id := testKey(t, 3)
	if !reflect.DeepEqual(b, testBid(id)) {
		t.Fatalf("decoded %+v", b)
	}
	if again, _ := s.Marshal(); !bytes.Equal(again, wire) {
		t.Fatal("re-marshal differs")
	}
}

func TestDecodeSignedBidRejects(t *testing.T) {
	wire := signedBidWire(t)
	key, id := testKey(t, 3)
	other, _ := testKey(t, 4)
	resign := func(f func(b *Bid), k any) []byte {
		b := testBid(id)
		f(b)
		body, _ := b.Encode()
		sig, _ := key.Sign(bidSignedBytes(body))
		if k != nil {
			sig, _ = other.Sign(bidSignedBytes(body))
		}
		w, _ := (&SignedBid{Body: body, Sig: sig}).Marshal()
		return w
	}
	flipped := append([]byte(nil), wire...)
	flipped[len(flipped)-1] ^= 1 // inside the signature
	for _, c := range []struct {
		name string
		wire []byte
		want error
	}{
		{"too large", make([]byte, MaxBidBytes+1), ErrBidTooLarge},
		{"garbage", []byte{0xff, 0x00}, ErrBadBidEncoding},
		{"trailing byte", append(append([]byte(nil), wire...), 0), ErrBadBidEncoding},
		{"flipped signature", flipped, ErrBadBidSignature},
		{"signed by another key", resign(func(*Bid) {}, other), ErrBadBidSignature},
		{"signed offer domain", func() []byte {
			body, _ := testBid(id).Encode()
			sig, _ := key.Sign(signedBytes(body)) // OfferDomain, not BidDomain
			w, _ := (&SignedBid{Body: body, Sig: sig}).Marshal()
			return w
		}(), ErrBadBidSignature},
		{"short nonce", resign(func(b *Bid) { b.Nonce = []byte("1234") }, nil), ErrBadBid},
		{"zero price", resign(func(b *Bid) { b.Price = 0 }, nil), ErrBadBid},
		{"bad tier", resign(func(b *Bid) { b.Tier = "platinum" }, nil), ErrBadBid},
		{"job id with space", resign(func(b *Bid) { b.JobID = "a b" }, nil), ErrBadBid},
		{"expired", resign(func(b *Bid) { b.ValidUntil = t0.Unix() }, nil), ErrBidExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := DecodeSignedBid(c.wire, t0); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	if _, err := SignBid(testBid(id), other); err == nil {
		t.Fatal("signed a bid for another provider")
	}
}

func FuzzDecodeSignedBid(f *testing.F) {
	wire := signedBidWire(f)
	f.Add(wire)
	f.Add(wire[:len(wire)/2])
	f.Add([]byte{0xa2, 0x01, 0x40, 0x02, 0x40})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, s, err := DecodeSignedBid(data, t0)
		if err != nil {
			if b != nil || s != nil {
				t.Fatal("returned a bid with an error")
			}
			return
		}
		// Accepted: valid, canonical and authentic, so re-encoding is
		// byte-identical and it verifies again.
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		again, _ := s.Marshal()
		if !bytes.Equal(again, data) {
			t.Fatal("accepted a non-canonical encoding")
		}
		if _, _, err := DecodeSignedBid(again, t0); err != nil {
			t.Fatal(err)
		}
	})
}
