package ledger

import (
	"testing"
)

// BenchmarkAppend measures entries validated (decode, schema, signature)
// and durably stored (one fsync'd bbolt transaction each) per second.
func BenchmarkAppend(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	k := newKey(b)
	ses := make([]*SignedEntry, b.N)
	var prev *Entry
	payload := make([]byte, 512)
	for i := range ses {
		e, se, err := NewEntry(k, prev, TypeTelemetryDigest, payload, t0)
		if err != nil {
			b.Fatal(err)
		}
		prev, ses[i] = e, se
	}
	b.ResetTimer()
	for _, se := range ses {
		if err := s.Append(se); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
