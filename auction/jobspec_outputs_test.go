package auction

import (
	"errors"
	"strings"
	"testing"
)

func TestJobSpecOutputs(t *testing.T) {
	s, err := ParseJobSpec(exampleWith(12, "outputs: {path: /outputs, max_size: 2GiB}"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Outputs != (Outputs{Path: "/outputs", MaxBytes: 2 << 30}) {
		t.Fatalf("outputs = %+v", s.Outputs)
	}
	assertRoundTrip(t, s)
	s, err = ParseJobSpec(exampleWith(12, "outputs: {path: /out}"))
	if err != nil || s.Outputs.MaxBytes != DefaultOutputBytes {
		t.Fatalf("outputs without max_size: %+v, %v", s.Outputs, err)
	}
	for _, c := range []struct{ repl, field, text string }{
		{"outputs: {max_size: 1GiB}", "outputs.path", "required with max_size"},
		{"outputs: {path: out}", "outputs.path", "absolute"},
		{"outputs: {path: /tmp/out}", "outputs.path", "/tmp"},
		{"outputs: {path: /o, max_size: 10GB}", "outputs.max_size", "a unit"},
		{"outputs: {path: /o, max_size: 1.5GiB}", "outputs.max_size", "whole number"},
		{"outputs: {path: /o, max_size: 65GiB}", "outputs.max_size", "1MiB to 64GiB"},
		{"outputs: {path: /checkpoint/out}", "outputs.path", "overlaps checkpoint.path"},
		{"inputs: [{cid: " + inputCID + ", path: /data}]\noutputs: {path: /data}", "outputs.path", "overlaps inputs[0]"},
	} {
		_, err := ParseJobSpec(exampleWith(12, c.repl))
		var se *SpecError
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(se.Msg, c.text) || se.Line < 12 {
			t.Errorf("%q: %v, want field %s at line 12 or after, saying %q", c.repl, err, c.field, c.text)
		}
	}
	for _, c := range []struct {
		in   string
		want int64
	}{{"512MiB", 512 << 20}, {"10GiB", 10 << 30}, {"1TiB", 1 << 40}, {"4097B", 4097}} {
		if got, err := ParseSize(c.in); err != nil || got != c.want || FormatSize(got) != c.in {
			t.Errorf("ParseSize(%q) = %d, %v; FormatSize back %q", c.in, got, err, FormatSize(got))
		}
	}
}
