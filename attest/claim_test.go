package attest

import (
	"errors"
	"testing"
)

func TestClaimRoundTrip(t *testing.T) {
	src, err := NewSimulatedSeed("2xRTX4090", "claim-test")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := src.Inventory(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c := ClaimOf(inv)
	if !c.Simulated || len(c.GPUs) != 2 || !c.GPUs[0].Simulated {
		t.Fatalf("a simulated inventory must claim simulated GPUs: %+v", c)
	}
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeClaim(b)
	if err != nil || !back.Equal(c) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if g, ok := back.GPU(UUIDHash(inv.GPUs[1].UUID)); !ok || g.Model != "RTX4090" {
		t.Fatalf("GPU lookup: %+v %v", g, ok)
	}
}

func TestClaimRejects(t *testing.T) {
	good := HardwareClaim{UUIDHash: "aa", Model: "H100", VRAMMiB: 81559}
	cases := map[string]Claim{
		"repeated GPU":          {GPUs: []HardwareClaim{good, good}},
		"no model":              {GPUs: []HardwareClaim{{UUIDHash: "bb"}}},
		"negative VRAM":         {GPUs: []HardwareClaim{{UUIDHash: "bb", Model: "H100", VRAMMiB: -1}}},
		"simulated claims real": {Simulated: true, GPUs: []HardwareClaim{good}},
		"too many GPUs":         {GPUs: make([]HardwareClaim, MaxClaimGPUs+1)},
	}
	for name, c := range cases {
		if _, err := c.Encode(); !errors.Is(err, ErrBadClaim) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeClaim(f *testing.F) {
	b, _ := Claim{GPUs: []HardwareClaim{{UUIDHash: "aa", Model: "H100", VRAMMiB: 81559}}}.Encode()
	f.Add(b)
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeClaim(b)
		if err != nil {
			return
		}
		again, err := c.Encode()
		if err != nil || string(again) != string(b) {
			t.Fatalf("accepted bytes that do not re-encode to themselves: %v", err)
		}
	})
}
