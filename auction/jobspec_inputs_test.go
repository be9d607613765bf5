package auction

import (
	"errors"
	"strings"
	"testing"
)

const inputCID = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"

func TestJobSpecInputs(t *testing.T) {
	s, err := ParseJobSpec(exampleWith(12, "inputs:\n  - {cid: "+inputCID+", path: /data}\n  - src: ./corpus\n    path: /corpus"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Input{{CID: inputCID, Path: "/data"}, {Src: "./corpus", Path: "/corpus"}}
	if len(s.Inputs) != 2 || s.Inputs[0] != want[0] || s.Inputs[1] != want[1] {
		t.Fatalf("inputs = %+v, want %+v", s.Inputs, want)
	}
	if !s.Unresolved() {
		t.Error("a spec with src is not reported unresolved")
	}
	assertRoundTrip(t, s)
	if got := s.dataCIDs(); len(got) != 1 || got[0] != inputCID {
		t.Errorf("dataCIDs = %v: the input's CID is what ranking's locality looks for", got)
	}
	s.Inputs[1] = Input{CID: inputCID, Path: "/corpus"}
	if s.Unresolved() {
		t.Error("a spec with CIDs only is reported unresolved")
	}
	// Inputs are part of what the bid and lease name: a different input
	// is a different spec.
	a, _ := SpecHash(s)
	s.Inputs[1].Path = "/other"
	if b, _ := SpecHash(s); string(a) == string(b) {
		t.Error("changing an input's path leaves the spec hash unchanged")
	}
}

func TestJobSpecInputErrors(t *testing.T) {
	for _, c := range []struct {
		name, repl          string
		wantLine            int
		wantField, wantText string
	}{
		{"not a list", "inputs: {cid: " + inputCID + "}", 12, "inputs", "want a list"},
		{"bad cid", "inputs: [{cid: bafyNOPE, path: /data}]", 12, "inputs[0].cid", "not a CID"},
		{"neither", "inputs: [{path: /data}]", 12, "inputs[0]", "give cid"},
		{"both", "inputs: [{cid: " + inputCID + ", src: ./x, path: /data}]", 12, "inputs[0]", "not both"},
		{"no path", "inputs: [{cid: " + inputCID + "}]", 12, "inputs[0].path", "required"},
		{"relative path", "inputs: [{cid: " + inputCID + ", path: data}]", 12, "inputs[0].path", "absolute"},
		{"unclean path", "inputs: [{cid: " + inputCID + ", path: /data/../etc}]", 12, "inputs[0].path", "clean"},
		{"root", "inputs: [{cid: " + inputCID + ", path: /}]", 12, "inputs[0].path", "below /"},
		{"under tmp", "inputs: [{cid: " + inputCID + ", path: /tmp/x}]", 12, "inputs[0].path", "/tmp"},
		{"over dev", "inputs: [{cid: " + inputCID + ", path: /dev}]", 12, "inputs[0].path", "/dev"},
		{"unknown key", "inputs: [{cid: " + inputCID + ", path: /d, mode: rw}]", 12, "inputs[0].mode", "unknown field"},
		{"repeated key", "inputs: [{cid: " + inputCID + ", path: /d, path: /e}]", 12, "inputs[0].path", "repeated"},
		{"nested paths", "inputs:\n  - {cid: " + inputCID + ", path: /data}\n  - {cid: " + inputCID + ", path: /data/more}", 14, "inputs[1].path", "overlaps inputs[0]"},
		{"over checkpoint", "inputs: [{cid: " + inputCID + ", path: /checkpoint}]", 12, "inputs[0].path", "overlaps checkpoint.path"},
		{"too many", "inputs: [" + strings.Repeat("{cid: "+inputCID+", path: /d}, ", MaxInputs) + "{cid: " + inputCID + ", path: /e}]", 12, "inputs", "limit 16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseJobSpec(exampleWith(12, c.repl))
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *SpecError", err)
			}
			if se.Line != c.wantLine || se.Field != c.wantField || !strings.Contains(se.Msg, c.wantText) {
				t.Fatalf("got %q (line %d, field %s), want line %d field %s message containing %q", err, se.Line, se.Field, c.wantLine, c.wantField, c.wantText)
			}
		})
	}
}
