package canon

import (
	"errors"
	"testing"
)

type pair struct {
	A []int  `cbor:"1,keyasint"`
	B string `cbor:"2,keyasint,omitempty"`
}

func TestNilAndEmptyEncodeAlike(t *testing.T) {
	a, _ := Enc.Marshal(pair{A: nil})
	b, _ := Enc.Marshal(pair{A: []int{}})
	if string(a) != string(b) || CID(a) != CID(b) {
		t.Fatalf("nil %x and empty %x differ", a, b)
	}
}

func TestSameRejectsOtherForms(t *testing.T) {
	canonical, _ := Enc.Marshal(pair{A: []int{1}, B: "x"})
	var p pair
	if err := Decoder(4, 16, 16).Unmarshal(canonical, &p); err != nil {
		t.Fatal(err)
	}
	if err := Same(&p, canonical); err != nil {
		t.Fatalf("canonical bytes refused: %v", err)
	}
	// The same map with its keys in the other order: valid CBOR, same value,
	// but not the canonical form.
	reordered := []byte{0xa2, 0x02, 0x61, 'x', 0x01, 0x81, 0x01}
	if err := Decoder(4, 16, 16).Unmarshal(reordered, &p); err != nil {
		t.Fatal(err)
	}
	if err := Same(&p, reordered); !errors.Is(err, ErrNotCanonical) {
		t.Fatalf("reordered keys accepted: %v", err)
	}
}

func TestDecoderIsStrict(t *testing.T) {
	var p pair
	for name, b := range map[string][]byte{
		"unknown field":  {0xa1, 0x03, 0x01},
		"duplicate key":  {0xa2, 0x02, 0x61, 'x', 0x02, 0x61, 'y'},
		"indefinite map": {0xbf, 0x02, 0x61, 'x', 0xff},
		"tag":            {0xc1, 0xa0},
	} {
		if err := Decoder(4, 16, 16).Unmarshal(b, &p); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
