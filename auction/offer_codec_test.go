package auction

import (
	"bytes"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
)

func signedOffer(t *testing.T) (*Offer, *SignedOffer, []byte) {
	t.Helper()
	key, id := testKey(t, 1)
	o := validOffer(id, t0)
	s, err := SignOffer(o, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return o, s, b
}

func TestEncodeDeterministic(t *testing.T) {
	_, id := testKey(t, 1)
	a, b := validOffer(id, t0), validOffer(id, t0)
	b.Addrs = []string{}              // empty vs nil must not change the bytes
	b.Calendar.Blackouts = []Window{} // nor inside nested structs
	ea, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	eb, _ := b.Encode()
	if !bytes.Equal(ea, eb) {
		t.Fatalf("equal offers encode differently:\n%x\n%x", ea, eb)
	}
	// Keys in core deterministic order: the map's first key is 1 (provider).
	if ea[0] != 0xac && ea[0] != 0xad && ea[0] != 0xae || ea[1] != 0x01 {
		t.Fatalf("unexpected map header/first key %x", ea[:2])
	}
	if a.CID() != b.CID() || a.CID().Prefix().Codec != CodecDagCBOR || !strings.HasPrefix(a.CID().String(), "bafyrei") {
		t.Fatalf("CID %s", a.CID())
	}
	b.Seq++
	if a.CID() == b.CID() {
		t.Fatal("different offers share a CID")
	}
}

func TestSignDecodeRoundTrip(t *testing.T) {
	o, s, wire := signedOffer(t)
	got, gs, err := DecodeSignedOffer(wire, t0)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := got.Encode()
	want, _ := o.Encode()
	if !bytes.Equal(enc, want) || !bytes.Equal(gs.Sig, s.Sig) || got.CID() != o.CID() || gs.CID() != o.CID() {
		t.Fatal("round trip changed the offer")
	}
	if got.Provider != o.Provider || got.Calendar.TimeZone != "Europe/Berlin" || len(got.GPUs) != 2 {
		t.Fatalf("decoded %+v", got)
	}
}

func TestSignOfferRefuses(t *testing.T) {
	key, id := testKey(t, 1)
	_, other := testKey(t, 2)
	if _, err := SignOffer(validOffer(other, t0), key); !errors.Is(err, errSignerNotProvider) {
		t.Fatalf("signed another provider's offer: %v", err)
	}
	bad := validOffer(id, t0)
	bad.Region.Continent = "xx"
	if _, err := SignOffer(bad, key); !errors.Is(err, ErrBadOffer) {
		t.Fatalf("signed an invalid offer: %v", err)
	}
}

// forge signs o's body with key, whoever o names as provider.
func forge(t *testing.T, o *Offer, keySeed int64) []byte {
	t.Helper()
	key, _ := testKey(t, keySeed)
	body, err := o.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := key.Sign(signedBytes(body))
	wire, _ := (&SignedOffer{Body: body, Sig: sig}).Marshal()
	return wire
}

// rawMap rebuilds a CBOR map from body's entries in the given key order,
// with optional replacements and extra raw bytes, to make non-canonical
// but otherwise well-formed encodings.
func rawMap(t *testing.T, body []byte, order func([]uint64), replace map[uint64][]byte, extra []byte, extraPairs int) []byte {
	t.Helper()
	var m map[uint64]cbor.RawMessage
	if err := cbor.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	var keys []uint64
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	order(keys)
	out := []byte{0xb8, byte(len(keys) + extraPairs)} // map, 1-byte length: non-minimal below 24 pairs
	for _, k := range keys {
		out = append(out, byte(k))
		if r, ok := replace[k]; ok {
			out = append(out, r...)
		} else {
			out = append(out, m[k]...)
		}
	}
	return append(out, extra...)
}

func wrap(t *testing.T, body []byte, keySeed int64) []byte {
	key, _ := testKey(t, keySeed)
	sig, _ := key.Sign(signedBytes(body))
	wire, _ := (&SignedOffer{Body: body, Sig: sig}).Marshal()
	return wire
}

func TestDecodeRejects(t *testing.T) {
	o, s, wire := signedOffer(t)
	keep := func([]uint64) {}
	canon := func(b []byte) []byte { // rawMap's 0xb8 header is itself non-canonical; fix it
		return append([]byte{0xa0 + b[1]}, b[2:]...)
	}
	tampered := *o
	tampered.Network = "mainnet"
	tamperedBody, _ := tampered.Encode()
	tamperedWire, _ := (&SignedOffer{Body: tamperedBody, Sig: s.Sig}).Marshal()
	invalid := *o
	invalid.Region.Country = "de"
	reversed := func(k []uint64) { sort.Slice(k, func(i, j int) bool { return k[i] > k[j] }) }

	cases := []struct {
		name string
		wire []byte
		now  time.Time
		want error
	}{
		{"valid", wire, t0, nil},
		{"oversized", append(wire, make([]byte, MaxOfferBytes)...), t0, ErrOfferTooLarge},
		{"trailing bytes", append(append([]byte{}, wire...), 0x00), t0, ErrBadEncoding},
		{"tampered body", tamperedWire, t0, ErrBadSignature},
		{"signer is not provider", forge(t, o, 2), t0, ErrBadSignature},
		{"invalid schema, validly signed", forge(t, &invalid, 1), t0, ErrBadOffer},
		{"expired", wire, time.Unix(o.ExpiresAt, 0), ErrOfferExpired},
		{"issued in the future", wire, t0.Add(-time.Hour), ErrOfferNotYetValid},
		{"rebuilt canonically is fine", wrap(t, canon(rawMap(t, s.Body, keep, nil, nil, 0)), 1), t0, nil},
		{"non-minimal map header", wrap(t, rawMap(t, s.Body, keep, nil, nil, 0), 1), t0, ErrBadEncoding},
		{"keys out of order", wrap(t, canon(rawMap(t, s.Body, reversed, nil, nil, 0)), 1), t0, ErrBadEncoding},
		{"non-minimal integer", wrap(t, canon(rawMap(t, s.Body, keep, map[uint64][]byte{3: {0x18, 0x01}}, nil, 0)), 1), t0, ErrBadEncoding},
		{"null instead of empty list", wrap(t, canon(rawMap(t, s.Body, keep, map[uint64][]byte{11: {0xf6}}, nil, 0)), 1), t0, ErrBadEncoding},
		{"duplicate key", wrap(t, canon(rawMap(t, s.Body, keep, nil, []byte{0x02, 0x61, 'x'}, 1)), 1), t0, ErrBadEncoding},
		{"unknown field", wrap(t, canon(rawMap(t, s.Body, keep, nil, []byte{0x18, 0x63, 0x01}, 1)), 1), t0, ErrBadEncoding},
		{"envelope keys reversed", append([]byte{0xa2, 0x02, 0x58, byte(len(s.Sig))}, append(s.Sig, append([]byte{0x01, 0x59, byte(len(s.Body) >> 8), byte(len(s.Body))}, s.Body...)...)...), t0, ErrBadEncoding},
		{"indefinite-length envelope", append([]byte{0xbf}, append(wire[1:], 0xff)...), t0, ErrBadEncoding},
		{"not CBOR", []byte("hello"), t0, ErrBadEncoding},
		{"empty signature", func() []byte { b, _ := (&SignedOffer{Body: s.Body, Sig: []byte{}}).Marshal(); return b }(), t0, ErrBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeSignedOffer(c.wire, c.now)
			t.Log(err)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestValidateNamesField(t *testing.T) {
	_, id := testKey(t, 1)
	cases := map[string]func(o *Offer){
		"provider":            func(o *Offer) { o.Provider = "not-a-peer" },
		"network":             func(o *Offer) { o.Network = "" },
		"expires_at":          func(o *Offer) { o.ExpiresAt = o.IssuedAt + 25*3600 },
		"gpus":                func(o *Offer) { o.GPUs = nil },
		"gpus[1].vram_mib":    func(o *Offer) { o.GPUs[1].VRAMMiB = 0 },
		"gpus[0].model":       func(o *Offer) { o.GPUs[0].Model = "H 100" },
		"compute_capability":  func(o *Offer) { o.GPUs[0].ComputeCap = "nine" },
		"region.continent":    func(o *Offer) { o.Region.Continent = "europe" },
		"region.country":      func(o *Offer) { o.Region.Country = "DEU" },
		"prices.bronze":       func(o *Offer) { o.Prices.Bronze = -1 },
		"prices: no tier":     func(o *Offer) { o.Prices = Prices{} },
		"windows[1]":          func(o *Offer) { o.Windows[1].Start = o.Windows[0].Start },
		"windows: must lie":   func(o *Offer) { o.Windows[1].End = o.ExpiresAt + 9*86400 },
		"policy.workloads":    func(o *Offer) { o.Policy.Workloads = []string{"mining"} },
		"datasets[0]":         func(o *Offer) { o.Datasets = []string{"not-a-cid"} },
		"calendar: time_zone": func(o *Offer) { o.Calendar.TimeZone = "Mars/Olympus" },
		"host":                func(o *Offer) { o.Host.CPUs = 0 },
	}
	for want, mutate := range cases {
		o := validOffer(id, t0)
		mutate(o)
		err := o.Validate()
		if !errors.Is(err, ErrBadOffer) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	w := validOffer(id, t0)
	w.Withdrawn, w.Prices = true, Prices{}
	if err := w.Validate(); err != nil {
		t.Errorf("a withdrawal needs no prices: %v", err)
	}
}

func FuzzDecodeSignedOffer(f *testing.F) {
	key, id := testKey(f, 1)
	s, err := SignOffer(validOffer(id, t0), key)
	if err != nil {
		f.Fatal(err)
	}
	wire, _ := s.Marshal()
	f.Add(wire)
	f.Add(wire[:len(wire)/2])
	priced := validOffer(id, t0)
	priced.Pricing = pricedOffer().Pricing
	if s, err = SignOffer(priced, key); err != nil {
		f.Fatal(err)
	}
	pricedWire, _ := s.Marshal()
	f.Add(pricedWire)
	// With bookings too, so the fuzzer starts from a valid key 17.
	booked := *priced
	booked.Booked = []Booking{{Start: t0.Unix() + 3600, End: t0.Unix() + 7200, GPUs: 1}}
	if s, err = SignOffer(&booked, key); err != nil {
		f.Fatal(err)
	}
	bookedWire, _ := s.Marshal()
	if _, _, err := DecodeSignedOffer(bookedWire, t0); err != nil {
		f.Fatalf("the booked seed does not decode: %v", err)
	}
	f.Add(bookedWire)
	f.Add([]byte{0xa2, 0x01, 0x40, 0x02, 0x40})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, s, err := DecodeSignedOffer(b, t0)
		if err != nil {
			return
		}
		body, err := o.Encode()
		if err != nil || !bytes.Equal(body, s.Body) {
			t.Fatalf("accepted offer re-encodes differently: %v", err)
		}
		again, _ := s.Marshal()
		if !bytes.Equal(again, b) {
			t.Fatal("accepted envelope re-encodes differently")
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("accepted invalid offer: %v", err)
		}
	})
}

// pricedOffer is validOffer with a price schedule on every field.
func pricedOffer() *Offer {
	o := validOffer(fakeID(1), t0)
	o.Pricing = &Pricing{TimeZone: "Europe/Berlin", SurgeBP: 5_000, CapBP: 20_000, Periods: []PricePeriod{
		{Weekly: WeeklyWindow{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "09:00", End: "18:00"}, MultBP: 15_000},
		{Weekly: WeeklyWindow{Days: []string{"sat"}, Start: "22:00", End: "02:00"}, Floors: Prices{Gold: 2_000_000}},
	}}
	return o
}

// TestPricingRoundTrip: Pricing travels under key 16 and survives signing
// and strict decoding unchanged; an offer without it encodes as before.
func TestPricingRoundTrip(t *testing.T) {
	key, id := testKey(t, 1)
	o := validOffer(id, t0)
	o.Pricing = pricedOffer().Pricing
	s, err := SignOffer(o, key)
	if err != nil {
		t.Fatal(err)
	}
	wire, _ := s.Marshal()
	got, _, err := DecodeSignedOffer(wire, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Pricing == nil || got.Pricing.TimeZone != "Europe/Berlin" || got.Pricing.CapBP != 20_000 || len(got.Pricing.Periods) != 2 ||
		got.Pricing.Periods[0].MultBP != 15_000 || got.Pricing.Periods[1].Floors.Gold != 2_000_000 || got.Pricing.Periods[1].Weekly.End != "02:00" {
		t.Fatalf("decoded pricing %+v", got.Pricing)
	}
	var m map[uint64]cbor.RawMessage
	if err := cbor.Unmarshal(s.Body, &m); err != nil || m[16] == nil {
		t.Fatalf("pricing not under key 16: %v", err)
	}
	plain := validOffer(id, t0)
	body, _ := plain.Encode()
	m = nil
	if err := cbor.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m[16]; ok {
		t.Fatal("an offer without pricing carries key 16")
	}
}

// TestDecodeRejectsBadPricing: hostile schedules, validly signed, are
// refused as invalid (bounded sizes and ranges) or non-canonical.
func TestDecodeRejectsBadPricing(t *testing.T) {
	_, id := testKey(t, 1)
	for name, mutate := range map[string]func(p *Pricing){
		"too many periods": func(p *Pricing) {
			for len(p.Periods) <= MaxPricePeriods {
				p.Periods = append(p.Periods, p.Periods[0])
			}
		},
		"multiplier below 1x":  func(p *Pricing) { p.Periods[0].MultBP = 5_000 },
		"multiplier above 10x": func(p *Pricing) { p.Periods[0].MultBP = 1 << 40 },
		"negative floor":       func(p *Pricing) { p.Periods[1].Floors.Gold = -1 },
		"huge floor":           func(p *Pricing) { p.Periods[1].Floors.Gold = 1 << 62 },
		"huge surge":           func(p *Pricing) { p.SurgeBP = 1 << 50 },
		"negative surge":       func(p *Pricing) { p.SurgeBP = -1 },
		"cap below 1x":         func(p *Pricing) { p.CapBP = 1 },
		"cap above the bound":  func(p *Pricing) { p.CapBP = BP + MaxSurgeBP + 1 },
		"bad rule":             func(p *Pricing) { p.Periods[0].Weekly.Days = []string{"someday"} },
		"no zone":              func(p *Pricing) { p.TimeZone = "" },
		"local zone":           func(p *Pricing) { p.TimeZone = "Local" },
		"empty period":         func(p *Pricing) { p.Periods[0].MultBP = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			o := validOffer(id, t0)
			o.Pricing = pricedOffer().Pricing
			mutate(o.Pricing)
			if _, _, err := DecodeSignedOffer(forge(t, o, 1), t0); !errors.Is(err, ErrBadOffer) || !strings.Contains(err.Error(), "pricing.") {
				t.Fatalf("got %v, want ErrBadOffer naming pricing", err)
			}
		})
	}
	// An empty schedule has one form: absent. Sent as an empty map (key
	// 16 after the body's last key, 15) it is refused.
	_, s, _ := signedOffer(t)
	withEmpty := wrap(t, append([]byte{s.Body[0] + 1}, append(s.Body[1:], 0x10, 0xa0)...), 1)
	if _, _, err := DecodeSignedOffer(withEmpty, t0); !errors.Is(err, ErrBadOffer) || !strings.Contains(err.Error(), "pricing: empty") {
		t.Fatalf("empty pricing map: got %v, want ErrBadOffer", err)
	}
}
