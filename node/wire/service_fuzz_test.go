package wire

import (
	"encoding/json"
	"testing"
)

// FuzzServiceHeader: whatever a peer sends, the decoder neither panics
// nor accepts a job ID the pattern refuses, and what it accepts encodes
// and decodes to itself within the frame limit.
func FuzzServiceHeader(f *testing.F) {
	for _, seed := range []string{
		`{"job":"job1"}`, `{"job":"g1a2b3c4-0123.x_y"}`, `{"job":""}`, `{"job":"../etc"}`, `{"job":1}`,
		`{"job":"a","extra":1}`, `{"job":"a"} {}`, `null`, `[]`, ``, `{"job":"` + string(make([]byte, 200)) + `"}`,
		`{"JOB":"a"}`, `{"job":"a\u0000"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeServiceHeader(b)
		if err != nil {
			return
		}
		if !ServiceJobPattern.MatchString(h.Job) || len(h.Job) > 128 {
			t.Fatalf("accepted job %q", h.Job)
		}
		enc, err := json.Marshal(h)
		if err != nil || len(enc) > MaxServiceHeader {
			t.Fatalf("re-encode %q: %d bytes, %v", h.Job, len(enc), err)
		}
		again, err := DecodeServiceHeader(enc)
		if err != nil || again != h {
			t.Fatalf("round trip %q: %+v, %v", enc, again, err)
		}
	})
}
