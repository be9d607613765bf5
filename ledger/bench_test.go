package ledger

import (
	"testing"
)

// BenchmarkAppend measures entries validated (decode, schema, signature)
// and durably stored (one fsync'd bbolt transaction each) per second.
func BenchmarkAppend(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ses := signedChain(b, b.N)
	b.ResetTimer()
	for _, se := range ses {
		if err := s.Append(se); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkAppendBatch is what replication pays per entry when a peer
// sends a range: full validation (signature included) of every entry, one
// fsync per batch of 256.
//
//	go test -run '^$' -bench AppendBatch -benchtime 20000x ./ledger
func BenchmarkAppendBatch(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ses := signedChain(b, b.N)
	b.ResetTimer()
	for i := 0; i < len(ses); i += 256 {
		errs, err := s.AppendBatch(ses[i:min(i+256, len(ses))])
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				b.Fatal(e)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// signedChain is one author's feed of n entries with 512-byte payloads.
func signedChain(b *testing.B, n int) []*SignedEntry {
	k := newKey(b)
	ses := make([]*SignedEntry, n)
	var prev *Entry
	payload := make([]byte, 512)
	for i := range ses {
		e, se, err := NewEntry(k, prev, TypeTelemetryDigest, payload, t0)
		if err != nil {
			b.Fatal(err)
		}
		prev, ses[i] = e, se
	}
	return ses
}
