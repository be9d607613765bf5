package auction

import (
	"encoding/binary"
	"math/rand"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// t0 is a fixed "now" for tests: Thu 2026-03-26 12:00 UTC.
var t0 = time.Date(2026, 3, 26, 12, 0, 0, 0, time.UTC)

// seededReader is a deterministic byte source for key generation.
type seededReader struct{ r *rand.Rand }

func (s seededReader) Read(p []byte) (int, error) { return s.r.Read(p) }

// testKey returns a deterministic Ed25519 key and its peer ID.
func testKey(t testing.TB, seed int64) (crypto.PrivKey, string) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(seededReader{rand.New(rand.NewSource(seed))})
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id.String()
}

// fakeID is a valid, canonical peer ID without a usable private key: cheap
// enough to make 100,000 of for book tests and benchmarks.
func fakeID(n uint64) string {
	var raw [32]byte
	binary.BigEndian.PutUint64(raw[:], n)
	binary.BigEndian.PutUint64(raw[8:], n*0x9e3779b97f4a7c15)
	pub, err := crypto.UnmarshalEd25519PublicKey(raw[:])
	if err != nil {
		panic(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return id.String()
}

// validOffer is a small valid offer issued at now by provider.
func validOffer(provider string, now time.Time) *Offer {
	iss := now.Unix()
	return &Offer{
		Provider:  provider,
		Network:   "testnet",
		Seq:       1,
		IssuedAt:  iss,
		ExpiresAt: iss + 3600,
		GPUs: []GPU{
			{Model: "H100", VRAMMiB: 81559, ComputeCap: "9.0", Simulated: true},
			{Model: "H100", VRAMMiB: 81559, ComputeCap: "9.0", Simulated: true},
		},
		Host:     Host{CPUs: 32, MemoryMiB: 256 << 10},
		Region:   Region{Country: "DE", Continent: "eu"},
		Prices:   Prices{Silver: 2_000_000, Bronze: 1_200_000},
		Windows:  []Window{{iss, iss + 8*3600}, {iss + 20*3600, iss + 30*3600}},
		Policy:   Policy{Workloads: []string{"batch"}, PreemptNotice: 60},
		Datasets: []string{"bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"},
		Calendar: &Calendar{TimeZone: "Europe/Berlin", Weekly: []WeeklyWindow{{Days: []string{"mon"}, Start: "19:00", End: "08:00"}}},
	}
}

// Realistic random offers, shared by the property test and the benchmark.
var (
	testModels = []struct {
		model string
		vram  int
		cc    string
	}{
		{"H100", 81559, "9.0"}, {"H200", 143771, "9.0"}, {"A100-80GB", 81920, "8.0"},
		{"A100-40GB", 40960, "8.0"}, {"RTX4090", 24564, "8.9"}, {"RTX3090", 24576, "8.6"},
		{"L40S", 46068, "8.9"}, {"V100", 16384, "7.0"}, {"RTX5090", 32607, "12.0"},
	}
	testCountries = []struct{ country, continent string }{
		{"DE", "eu"}, {"FR", "eu"}, {"US", "na"}, {"CA", "na"}, {"JP", "as"},
		{"TW", "as"}, {"BR", "sa"}, {"AU", "oc"}, {"ZA", "af"},
	}
	testDatasets = []string{
		"bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
		"QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
		"bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
	}
)

// randomWindows are a few nights and weekends from issue on, so that
// "available" varies between 0 and days.
func randomWindows(r *rand.Rand, iss int64) []Window {
	var ws []Window
	at := iss - int64(r.Intn(4))*3600
	for len(ws) < 1+r.Intn(6) {
		start := at + int64(r.Intn(12))*3600
		end := start + int64(1+r.Intn(48))*1800
		if start < iss {
			start = iss
		}
		if end > start {
			ws = append(ws, Window{start, end})
		}
		at = end + int64(r.Intn(3))*3600 // 0 = touching
	}
	return ws
}

// randomOffer draws a valid offer; gpu mixes are mostly homogeneous.
func randomOffer(r *rand.Rand, provider string, now int64) *Offer {
	iss := now - 600*int64(r.Intn(6)) // 10-minute steps, so query boundaries are hit exactly
	o := &Offer{
		Provider: provider, Network: "testnet", Seq: uint64(1 + r.Intn(100)),
		IssuedAt: iss, ExpiresAt: now + 600*int64(1+r.Intn(12)),
		Host:    Host{CPUs: 1 << r.Intn(8), MemoryMiB: (8 << r.Intn(7)) * 1024},
		Windows: randomWindows(r, iss),
		Policy:  Policy{Workloads: [][]string{{"batch"}, {"service"}, {"batch", "service"}}[r.Intn(3)], MaxDurationSec: []int64{0, 3600, 4 * 3600, 86400}[r.Intn(4)]},
	}
	c := testCountries[r.Intn(len(testCountries))]
	o.Region = Region{Country: c.country, Continent: c.continent}
	m := testModels[r.Intn(len(testModels))]
	sim := r.Intn(5) == 0
	for n := 1 << r.Intn(4); n > 0; n-- {
		if r.Intn(10) == 0 {
			m = testModels[r.Intn(len(testModels))]
		}
		o.GPUs = append(o.GPUs, GPU{Model: m.model, VRAMMiB: m.vram, ComputeCap: m.cc, Simulated: sim})
	}
	for i, p := range []*Credits{&o.Prices.Gold, &o.Prices.Silver, &o.Prices.Bronze} {
		if r.Intn(3) > 0 || i == 2 && o.Prices.Gold == 0 && o.Prices.Silver == 0 {
			*p = Credits(100_000 * (1 + r.Intn(40)))
		}
	}
	for _, d := range testDatasets {
		if r.Intn(3) == 0 {
			o.Datasets = append(o.Datasets, d)
		}
	}
	return o
}
