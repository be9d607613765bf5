package auction

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ArraySpec is a job array: the same batch job run as Shards independent
// jobs (shards), each told its index, at most MaxParallel of them in
// flight at once. The renter's node places each shard as a job of its
// own (node/renting/array.go).
type ArraySpec struct {
	Shards      int         // shards: 1..MaxShards
	MaxParallel int         // max_parallel: 1..Shards; defaults to min(Shards, DefaultMaxParallel)
	Split       *ArraySplit // split: deal an input's files over the shards; nil: every shard sees every input whole
}

// ArraySplit deals the files of one of the spec's inputs over the
// shards: the renter's node gives each shard's spec, in that input's
// place, a directory holding only the shard's files (node/renting,
// array_split.go), so that the shards together read the input once.
type ArraySplit struct {
	Input string // input: the path of one of the spec's inputs
	By    string // by: SplitByFile, the one way there is
}

// SplitByFile deals whole files: a shard sees each of its files at the
// same path below the input as the whole input has it.
const SplitByFile = "file"

// ShardOf marks one shard's spec: the renter's node writes it into the
// spec it sends for shard Index of an array of Count, and the provider
// gives the job GLEANER_SHARD_INDEX and GLEANER_SHARD_COUNT from it (the
// GLEANER_ prefix is the provider's, so the renter cannot set them as env).
type ShardOf struct {
	Index int // index: 0-based
	Count int // count: the array's shards
}

// Array limits: an array is one record and a row per shard in the
// renter's node, so a huge one costs memory and status output; ten
// thousand shards of a large dataset is already a large batch.
const (
	MaxShards          = 10_000
	DefaultMaxParallel = 20
)

// Env names the provider's executor sets for a shard.
const (
	EnvShardIndex = ReservedEnvPrefix + "SHARD_INDEX"
	EnvShardCount = ReservedEnvPrefix + "SHARD_COUNT"
)

// ShardEnv is the environment a shard's container gets, nil for a job
// that is not a shard.
func (s *JobSpec) ShardEnv() map[string]string {
	if s.Shard == nil {
		return nil
	}
	return map[string]string{EnvShardIndex: strconv.Itoa(s.Shard.Index), EnvShardCount: strconv.Itoa(s.Shard.Count)}
}

func arr(s *JobSpec) *ArraySpec {
	if s.Array == nil {
		s.Array = &ArraySpec{}
	}
	return s.Array
}

func shardOf(s *JobSpec) *ShardOf {
	if s.Shard == nil {
		s.Shard = &ShardOf{}
	}
	return s.Shard
}

var arraySchema = []specField{
	{name: "shards", typ: "integer", required: true, help: "how many shards, 1..10000; each is a job of its own with GLEANER_SHARD_INDEX (0-based) and GLEANER_SHARD_COUNT in its environment",
		set: setShards},
	{name: "max_parallel", typ: "integer", def: "min(shards, 20)", help: "at most this many shards in flight (submitted and not ended) at once, 1..shards",
		set: setMaxParallel},
	{name: "split", typ: "mapping", def: "none (every shard sees every input whole)", help: "deal one input's files over the shards: each shard sees at that input's path only its files, and together they cover it once", sub: splitSchema},
}

var splitSchema = []specField{
	{name: "input", typ: "path", required: true, help: "the path of one of inputs, such as /data",
		set: strVal(func(s *JobSpec) *string { return &splitOf(s).Input }, func(v string) (string, error) { return v, nil })},
	{name: "by", typ: "string", def: "file", help: "file: whole files, balanced by size (largest first onto the lightest shard); needs at least as many files as shards",
		set: strVal(func(s *JobSpec) *string { return &splitOf(s).By }, validSplitBy)},
}

func splitOf(s *JobSpec) *ArraySplit {
	a := arr(s)
	if a.Split == nil {
		a.Split = &ArraySplit{}
	}
	return a.Split
}

func validSplitBy(v string) (string, error) {
	if v != SplitByFile {
		return "", fmt.Errorf("%q: the one way to split is file (whole files)", v)
	}
	return v, nil
}

// SplitInput is the index in Inputs of the input the array's split
// deals, -1 when the spec has no split.
func (s *JobSpec) SplitInput() int {
	if s.Array == nil || s.Array.Split == nil {
		return -1
	}
	for i, in := range s.Inputs {
		if in.Path == s.Array.Split.Input {
			return i
		}
	}
	return -1
}

var shardSchema = []specField{
	{name: "index", typ: "integer", required: true, help: "0-based, below count",
		set: intVal(func(s *JobSpec) *int { return &shardOf(s).Index }, 0, MaxShards-1)},
	{name: "count", typ: "integer", required: true, help: "the array's shards, 1..10000",
		set: intVal(func(s *JobSpec) *int { return &shardOf(s).Count }, 1, MaxShards)},
}

// setShards and setMaxParallel word their bounds as a user fixing the
// field reads them, rather than integer's "must be a whole number 1..N".
func setShards(d *specDecoder, path string, n *yaml.Node) error {
	i, err := integer(path, n, -1<<31, 1<<31)
	switch {
	case err != nil:
		return specErr(n, path, "must be a whole number 1..%d, got %q", MaxShards, n.Value)
	case i < 1:
		return specErr(n, path, "must be at least 1")
	case i > MaxShards:
		return specErr(n, path, "must be at most %d, got %d", MaxShards, i)
	}
	arr(d.s).Shards = i
	return nil
}

func setMaxParallel(d *specDecoder, path string, n *yaml.Node) error {
	i, err := integer(path, n, -1<<31, 1<<31)
	switch {
	case err != nil:
		return specErr(n, path, "must be a whole number, got %q", n.Value)
	case i < 1:
		return specErr(n, path, "must be at least 1")
	}
	arr(d.s).MaxParallel = i
	return nil
}

// checkArray is array's and shard's cross-field checks, after the
// service's (which sets kind's meaning).
func (d *specDecoder) checkArray() error {
	s := d.s
	if s.Array != nil && s.Shard != nil {
		return d.errAt("shard", []string{"shard"}, "a shard is one job of an array: the renter's node writes shard, never with array")
	}
	if s.Shard != nil && s.Shard.Index >= s.Shard.Count {
		return d.errAt("shard.index", []string{"shard.index"}, "%d is not below shard.count %d", s.Shard.Index, s.Shard.Count)
	}
	a := s.Array
	if a == nil {
		return nil
	}
	if s.Service != nil {
		return d.errAt("array", []string{"array"}, "only a batch job runs as an array; a service scales by service.replicas")
	}
	if s.Verify.Replicas > 1 {
		return d.errAt("array", []string{"array", "verify.replicas"}, "an array's shards cannot also be verify replicas; remove one of them")
	}
	if a.MaxParallel == 0 {
		a.MaxParallel = min(a.Shards, DefaultMaxParallel)
	}
	if a.MaxParallel > a.Shards {
		return d.errAt("array.max_parallel", []string{"array.max_parallel"}, "array.max_parallel (%d) is more than array.shards (%d)", a.MaxParallel, a.Shards)
	}
	return d.checkSplit()
}

// checkSplit: split names one of the spec's inputs by its path.
func (d *specDecoder) checkSplit() error {
	sp := d.s.Array.Split
	if sp == nil {
		return nil
	}
	if sp.By == "" {
		sp.By = SplitByFile
	}
	if d.s.SplitInput() >= 0 {
		return nil
	}
	paths := make([]string, 0, len(d.s.Inputs))
	for _, in := range d.s.Inputs {
		paths = append(paths, in.Path)
	}
	if len(paths) == 0 {
		return d.errAt("array.split.input", []string{"array.split.input", "array.split"}, "%s: the spec has no inputs; add {src: ./dir, path: %s} to inputs", sp.Input, sp.Input)
	}
	return d.errAt("array.split.input", []string{"array.split.input", "array.split"}, "%s is not the path of any input (inputs' paths: %s)", sp.Input, strings.Join(paths, ", "))
}

// encodeArray writes array and shard with every default spelled out.
func encodeArray(root *yaml.Node, s *JobSpec) {
	if a := s.Array; a != nil {
		m := yMap()
		m.Style = yaml.FlowStyle
		yAdd(m, "shards", yInt(a.Shards))
		yAdd(m, "max_parallel", yInt(a.MaxParallel))
		if sp := a.Split; sp != nil {
			sm := yMap()
			yAdd(sm, "input", yStr(sp.Input))
			yAdd(sm, "by", yStr(sp.By))
			yAdd(m, "split", sm)
		}
		yAdd(root, "array", m)
	}
	if sh := s.Shard; sh != nil {
		m := yMap()
		m.Style = yaml.FlowStyle
		yAdd(m, "index", yInt(sh.Index))
		yAdd(m, "count", yInt(sh.Count))
		yAdd(root, "shard", m)
	}
}

// ShardSpec is shard i's spec: the array's, with array replaced by shard.
func (s *JobSpec) ShardSpec(i int) (*JobSpec, error) {
	if s.Array == nil || i < 0 || i >= s.Array.Shards {
		return nil, fmt.Errorf("no shard %d", i)
	}
	c := *s
	c.Shard = &ShardOf{Index: i, Count: s.Array.Shards}
	c.Array = nil
	return &c, nil
}
