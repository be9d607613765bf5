package gateway

import (
	"bytes"
	"testing"
)

// FuzzUsageScanner feeds the usage scanner any body, whole and cut into
// pieces at the fuzzer's choice: it must not panic, must keep no more
// than its bounds (a key's worth of carry, one usage object plus the
// piece being read), and, for a body no longer than one usage object may
// be (so that no object is dropped for its size partway through), must
// find the same usage however the body was cut.
func FuzzUsageScanner(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`), []byte{3, 9, 40})
	f.Add([]byte("data: {\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"), []byte{1, 1, 1, 7})
	f.Add([]byte(`{"text":"\"usage\": {\"total_tokens\":9}","usage" : {"x":"}{\\"}","total_tokens":4}}`), []byte{6, 2})
	f.Add([]byte(`"usage""usage":"usage":{`), []byte{1})
	f.Fuzz(func(t *testing.T, body, cuts []byte) {
		var whole usageScanner
		whole.Write(body)
		wantU, wantOK := whole.Usage()

		var split usageScanner
		rest := body
		for _, c := range cuts {
			n := min(int(c), len(rest))
			split.Write(rest[:n])
			if len(split.carry) >= len(usageKey) {
				t.Fatalf("carry %d bytes", len(split.carry))
			}
			if len(split.obj) > maxUsageObject+n {
				t.Fatalf("kept %d bytes of an object after a %d-byte piece", len(split.obj), n)
			}
			rest = rest[n:]
		}
		split.Write(rest)
		gotU, gotOK := split.Usage()
		if len(body) <= maxUsageObject && (gotU != wantU || gotOK != wantOK) {
			t.Fatalf("cut %v: %+v %v, whole: %+v %v", cuts, gotU, gotOK, wantU, wantOK)
		}
		if gotOK && bytes.Count(body, usageKey) == 0 {
			t.Fatal("usage found in a body without the key")
		}
	})
}
