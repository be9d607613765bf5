package auction

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const arrayBase = `name: embed
image: embedder:1
resources: {gpus: 1}
tier: bronze
max_price: 0.8
duration: {max: 1h}
`

func TestArraySpecDefaultsAndRoundTrip(t *testing.T) {
	for _, c := range []struct {
		array      string
		shards, mp int
	}{
		{"array: {shards: 100}", 100, DefaultMaxParallel},
		{"array: {shards: 6}", 6, 6},
		{"array: {shards: 10, max_parallel: 3}", 10, 3},
		{"array: {shards: 10000, max_parallel: 10000}", 10000, 10000},
	} {
		s, err := ParseJobSpec([]byte(arrayBase + c.array + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", c.array, err)
		}
		if s.Array == nil || s.Array.Shards != c.shards || s.Array.MaxParallel != c.mp {
			t.Fatalf("%s: got %+v", c.array, s.Array)
		}
		b, err := yaml.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseJobSpec(b)
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Fatalf("%s: round trip: %v\n%s", c.array, err, b)
		}
	}
}

func TestShardSpecCarriesIndexAndEnv(t *testing.T) {
	s, err := ParseJobSpec([]byte(arrayBase + "array: {shards: 8, max_parallel: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := s.ShardSpec(7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := yaml.Marshal(sh)
	back, err := ParseJobSpec(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if back.Array != nil || *back.Shard != (ShardOf{Index: 7, Count: 8}) {
		t.Fatalf("got array %+v shard %+v", back.Array, back.Shard)
	}
	env := back.ShardEnv()
	if env[EnvShardIndex] != "7" || env[EnvShardCount] != "8" {
		t.Fatalf("env %v", env)
	}
	if s.ShardEnv() != nil {
		t.Fatal("an array's own spec is no shard")
	}
	if _, err := s.ShardSpec(8); err == nil {
		t.Fatal("shard 8 of 8 accepted")
	}
	// A plain batch job's spec is written as before arrays existed, so
	// the hashes its leases name are unchanged.
	plain, _ := ParseJobSpec([]byte(arrayBase))
	if b, _ := yaml.Marshal(plain); strings.Contains(string(b), "array") || strings.Contains(string(b), "shard") {
		t.Fatalf("plain spec writes array fields:\n%s", b)
	}
}

// A split names an input by its path; by defaults to file and is written
// out; a shard's spec carries no split (the renter's node has put the
// shard's own directory in that input's place).
func TestArraySplitParsesAndRoundTrips(t *testing.T) {
	s, err := ParseJobSpec([]byte(arrayBase + "inputs: [{cid: bafkqaaa, path: /w}, {src: ./corpus, path: /data}]\narray: {shards: 4, split: {input: /data}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Array.Split == nil || *s.Array.Split != (ArraySplit{Input: "/data", By: SplitByFile}) || s.SplitInput() != 1 {
		t.Fatalf("split %+v, input %d", s.Array.Split, s.SplitInput())
	}
	b, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseJobSpec(b)
	if err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip: %v\n%s", err, b)
	}
	sh, err := s.ShardSpec(3)
	if err != nil {
		t.Fatal(err)
	}
	if sh.Array != nil || sh.SplitInput() != -1 {
		t.Fatalf("shard spec keeps the array: %+v", sh.Array)
	}
	if plain, _ := ParseJobSpec([]byte(arrayBase + "array: {shards: 4}\n")); plain.SplitInput() != -1 {
		t.Fatal("an array without split has a split input")
	}
}

func TestArraySpecBadInput(t *testing.T) {
	for _, c := range []struct{ extra, field, msg string }{
		{"array: {shards: 0}", "array.shards", "must be at least 1"},
		{"array: {shards: -3}", "array.shards", "must be at least 1"},
		{"array: {shards: 10001}", "array.shards", "must be at most 10000"},
		{"array: {shards: many}", "array.shards", "must be a whole number"},
		{"array: {max_parallel: 2}", "array.shards", "required"},
		{"array: {shards: 10, max_parallel: 30}", "array.max_parallel", "array.max_parallel (30) is more than array.shards (10)"},
		{"array: {shards: 10, max_parallel: 0}", "array.max_parallel", "must be at least 1"},
		{"array: {shards: 10, split: {input: /data, by: file}}", "array.split.input", "the spec has no inputs"},
		{"inputs: [{src: ./d, path: /data}, {src: ./w, path: /w}]\narray: {shards: 2, split: {input: /dat}}", "array.split.input", "/dat is not the path of any input (inputs' paths: /data, /w)"},
		{"inputs: [{src: ./d, path: /data}]\narray: {shards: 2, split: {input: /data, by: line}}", "array.split.by", `"line": the one way to split is file`},
		{"inputs: [{src: ./d, path: /data}]\narray: {shards: 2, split: {by: file}}", "array.split.input", "required"},
		{"inputs: [{src: ./d, path: /data}]\narray: {shards: 2, split: {input: /data, bogus: 1}}", "array.split.bogus", "unknown field"},
		{"array: {shards: 2, bogus: 1}", "array.bogus", "unknown field"},
		{"array: {shards: 2}\nverify: {replicas: 2}", "array", "verify replicas"},
		{"array: {shards: 2}\nshard: {index: 0, count: 2}", "shard", "never with array"},
		{"shard: {index: 2, count: 2}", "shard.index", "not below shard.count"},
	} {
		_, err := ParseJobSpec([]byte(arrayBase + c.extra + "\n"))
		var se *SpecError
		if !errors.As(err, &se) || !errors.Is(err, ErrBadJobSpec) {
			t.Fatalf("%s: want a SpecError, got %v", c.extra, err)
		}
		if se.Field != c.field || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%s: got %v, want field %s with %q", c.extra, err, c.field, c.msg)
		}
	}
}

func TestArrayOnlyForBatch(t *testing.T) {
	svc := `name: web
kind: service
image: web:1
service: {port: 8080, readiness: {path: /health}}
resources: {gpus: 1}
tier: silver
max_price: 1
duration: {max: 1h}
array: {shards: 2}
`
	_, err := ParseJobSpec([]byte(svc))
	var se *SpecError
	if !errors.As(err, &se) || se.Field != "array" || !strings.Contains(se.Msg, "only a batch job") {
		t.Fatalf("got %v", err)
	}
}

func TestArrayExampleParses(t *testing.T) {
	b, err := os.ReadFile("../docs/examples/array.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseJobSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Array == nil || s.Array.Shards != 100 || s.Array.MaxParallel != 20 {
		t.Fatalf("array %+v", s.Array)
	}
	b, err = os.ReadFile("../docs/examples/array-split.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s, err = ParseJobSpec(b); err != nil {
		t.Fatal(err)
	}
	if s.SplitInput() != 0 || s.Array.Split.By != SplitByFile || s.Array.Shards != 8 {
		t.Fatalf("array-split.yaml: %+v, split input %d", s.Array, s.SplitInput())
	}
}
