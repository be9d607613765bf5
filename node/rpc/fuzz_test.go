package rpc

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// FuzzDecodeRequest: the decoder never panics, and it yields either one
// whole-message error with a spec code, or calls that are each valid or
// carry -32600, and every reply it leads to is valid JSON.
func FuzzDecodeRequest(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, path := range files {
		_, cases := parseGolden(f, path)
		for _, c := range cases {
			f.Add([]byte(c.body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reqs, batch, err := decodeRequest(body, 8)
		if err != nil {
			if reqs != nil || (err.Code != CodeParse && err.Code != CodeInvalidRequest) {
				t.Fatalf("whole-message error %v with %d calls", err, len(reqs))
			}
			if !json.Valid(appendResponse(nil, nil, nil, err)) {
				t.Fatal("invalid error reply")
			}
			return
		}
		if len(reqs) == 0 || len(reqs) > 8 || (!batch && len(reqs) != 1) {
			t.Fatalf("%d calls, batch %v", len(reqs), batch)
		}
		for _, r := range reqs {
			if r.id != nil && !validID(r.id) {
				t.Fatalf("accepted id %s", r.id)
			}
			if r.err != nil {
				if r.err.Code != CodeInvalidRequest {
					t.Fatalf("per-call code %d", r.err.Code)
				}
			} else if r.params != nil && r.params[0] != '{' && r.params[0] != '[' {
				t.Fatalf("accepted params %s", r.params)
			}
			if !json.Valid(appendResponse(nil, r.id, []byte("true"), r.err)) {
				t.Fatalf("invalid reply for id %s", r.id)
			}
		}
	})
}
