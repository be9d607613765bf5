package auction

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// JobSpec is a renter's request, parsed from YAML by ParseJobSpec. Every
// field is documented, with its YAML name, in JobSpecFields; the zero value
// of an optional field means "no constraint" unless its doc says otherwise.
type JobSpec struct {
	Name        string            // name: a label for the renter, 1..64 of A-Z a-z 0-9 . _ -
	Image       string            // image: OCI reference, [registry/]path[:tag][@digest]
	Command     []string          // command: argv; empty runs the image's entrypoint
	Env         map[string]string // env: environment for the container
	SecretsFile string            // secrets_file: read by the renter's node, sent to the provider only
	// registry_auth_file: credentials for a private image's registry, read by
	// the CLI and sent to the winning provider only
	RegistryAuthFile string
	// service: set for kind: service (IsService), nil for a batch job
	// (jobspec_service.go)
	Service        *Service
	Resources      Resources   // resources
	Tier           Tier        // tier: gold, silver or bronze
	MaxPrice       Credits     // max_price: per GPU-hour; never exceeded
	Duration       JobDuration // duration
	Start          time.Time   // start: gold (or a gold service.floor) only, the reserved window's start (UTC)
	Placement      Placement   // placement
	Datasets       []string    // datasets: CIDs the job reads; providers caching them rank higher
	Inputs         []Input     // inputs: file trees fetched by CID and mounted read-only (jobspec_inputs.go)
	Outputs        Outputs     // outputs: the results volume, returned by CID (jobspec_outputs.go)
	Checkpoint     Checkpoint  // checkpoint
	Retry          Retry       // retry
	Workload       string      // workload: batch (default) or service
	AllowSimulated bool        // allow_simulated: accept simulated GPUs (local testnets)
	Verify         Verify      // verify
	Array          *ArraySpec  // array: run as shards (jobspec_array.go); nil for one job
	Shard          *ShardOf    // shard: this job is one shard of an array; nil otherwise
	Gang           *GangSpec   // gang: run on several providers together (jobspec_gang.go); nil for one job
	GangOf         *GangOf     // gang_of: this job is one member of a gang; nil otherwise

	// relStart: start was given relative ("+2h") and resolved against the
	// clock when parsed; see StartWasRelative.
	relStart bool
}

// StartWasRelative reports that start was written relative to now
// ("+2h"). Such a spec means another instant each time it is parsed, so
// whoever keeps or sends it must keep its normalised form (yaml.Marshal),
// which names the instant it was resolved to.
func (s *JobSpec) StartWasRelative() bool { return s.relStart }

// Verify asks the renter's node to check the provider's work. The output
// checked is the job's standard output, hashed by the provider as it
// streams; results become probe entries in the renter's ledger feed.
type Verify struct {
	Replicas     int    // replicas: run on this many different providers and compare; 0 means 1
	ExpectSHA256 string // expect_sha256: known answer (a canary): the stdout's sha256, lower-case hex
}

// MaxReplicas bounds verify.replicas: three decide by majority; more only
// multiplies the bill.
const MaxReplicas = 3

// Resources is what one lease needs.
type Resources struct {
	GPUs      int      // gpus: 1..16, all on one provider
	MinVRAMGB int      // min_vram_gb: per GPU, in GB of 10^9 bytes (cards are sold in these)
	Models    []string // models: acceptable GPU models, case-insensitive; empty = any
	CPUs      int      // cpus: host cores; 0 = any
	MemoryGB  int      // memory_gb: host memory, GB of 10^9 bytes; 0 = any
}

// JobDuration bounds how long the job runs.
type JobDuration struct {
	Expected time.Duration // expected: for the provider's planning; defaults to Max
	Max      time.Duration // max: the lease's length; the job is stopped after it
}

// Placement is where the job may run.
type Placement struct {
	Regions       []string      // regions: continent codes; empty = anywhere
	DenyCountries []string      // deny_countries: ISO 3166-1 alpha-2 codes
	MaxRTT        time.Duration // max_rtt_ms: round trip from the renter; 0 = no limit
}

// Checkpoint is where the job keeps state that survives a re-auction.
type Checkpoint struct {
	Path string // path: absolute path inside the container; empty = no checkpoint
}

// Retry says when a failed or preempted job is auctioned again.
type Retry struct {
	MaxReauctions int   // max_reauctions: 0..100
	OnExitCodes   []int // on_exit_codes: exit codes (1..255) that mean "retry"
}

// Job spec limits: a spec arrives over RPC and must not cost unbounded work.
const (
	MaxJobSpecBytes  = 64 << 10
	MaxJobDuration   = 30 * 24 * time.Hour
	maxSpecList      = 256 // command arguments, env entries, exit codes
	maxSpecString    = 4096
	maxSpecDepth     = 8
	maxJobGPUs       = 16
	maxReauctions    = 100
	maxRTTMillis     = 10_000
	maxResourceCount = 1 << 16 // cpus, GB of memory or VRAM
)

// ErrBadJobSpec is wrapped by every ParseJobSpec error, each a *SpecError.
var ErrBadJobSpec = errors.New("invalid job spec")

// SpecError locates a job spec error: the YAML line (1-based; 0 when the
// error is about the whole document) and the dotted field path.
type SpecError struct {
	Line  int
	Field string
	Msg   string
}

// Error reads "line 7: resources.gpus: must be 1..16", the form editors and
// CI logs link to.
func (e *SpecError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Msg)
	}
	return e.Field + ": " + e.Msg
}

// Unwrap makes errors.Is(err, ErrBadJobSpec) hold, so the RPC layer can
// answer "invalid params" without inspecting the message.
func (e *SpecError) Unwrap() error { return ErrBadJobSpec }

func specErr(n *yaml.Node, field, format string, args ...any) *SpecError {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &SpecError{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ParseJobSpec parses and validates one YAML document. It decodes into
// yaml.Node and walks the tree itself rather than unmarshalling into
// structs, so that every error carries the line and dotted field, unknown
// or repeated fields are errors, and scalars are read as written (max_price
// 0.60 is parsed as an exact decimal, never through a float).
func ParseJobSpec(data []byte) (*JobSpec, error) {
	if len(data) > MaxJobSpecBytes {
		return nil, specErr(nil, "(document)", "%d bytes, limit %d", len(data), MaxJobSpecBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, specErr(nil, "(document)", "empty")
		}
		return nil, syntaxErr(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, specErr(&extra, "(document)", "more than one YAML document")
	}
	if len(doc.Content) != 1 {
		return nil, specErr(&doc, "(document)", "empty")
	}
	root := doc.Content[0]
	// Anchors and aliases let a small document expand into a huge tree;
	// a job spec has no use for them, so they are refused outright.
	if err := plainTree(root, 0); err != nil {
		return nil, err
	}
	d := &specDecoder{s: &JobSpec{}, lines: map[string]int{}, keys: map[string]int{}}
	if err := d.mapping(root, "", jobSpecSchema); err != nil {
		return nil, err
	}
	if err := d.crossChecks(root); err != nil {
		return nil, err
	}
	return d.s, nil
}

func syntaxErr(err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &SpecError{Line: line, Field: "(syntax)", Msg: m[2]}
	}
	return specErr(nil, "(syntax)", "%v", err)
}

func plainTree(n *yaml.Node, depth int) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return specErr(n, "(document)", "YAML anchors and aliases are not supported")
	}
	if depth > maxSpecDepth {
		return specErr(n, "(document)", "nested deeper than %d", maxSpecDepth)
	}
	for _, c := range n.Content {
		if err := plainTree(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// specField is one YAML field: its doc and how to decode it. The schema
// table (jobspec_fields.go) is both the parser and the documentation, so
// the two cannot drift apart.
type specField struct {
	name, typ, def, help string
	required             bool
	set                  func(d *specDecoder, path string, n *yaml.Node) error
	sub                  []specField // a nested mapping instead of set
}

type specDecoder struct {
	s     *JobSpec
	kind  string         // kind: as written; "" is batch
	lines map[string]int // dotted path -> line of its value, for cross-field errors
	keys  map[string]int // dotted path -> line of its name: where a block mapping starts
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// mapping decodes a mapping node against schema. A null value counts as
// absent, so "start:" with nothing after it is the same as no start.
func (d *specDecoder) mapping(n *yaml.Node, prefix string, schema []specField) error {
	if n.Kind != yaml.MappingNode {
		field := prefix
		if field == "" {
			field = "(document)"
		}
		return specErr(n, field, "want a mapping of field: value")
	}
	present := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return specErr(k, joinPath(prefix, "?"), "field names must be plain strings")
		}
		path := joinPath(prefix, k.Value)
		f := lookupField(schema, k.Value)
		if f == nil {
			return specErr(k, path, "unknown field (known: %s)", specFieldNames(schema))
		}
		if _, dup := d.lines[path]; dup {
			return specErr(k, path, "repeated")
		}
		d.lines[path], d.keys[path] = v.Line, k.Line
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue
		}
		present[f.name] = true
		var err error
		if f.sub != nil {
			err = d.mapping(v, path, f.sub)
		} else {
			err = f.set(d, path, v)
		}
		if err != nil {
			return err
		}
	}
	for _, f := range schema {
		if f.required && !present[f.name] {
			// At the section's name, not its first field's: in block
			// style ("service:" then its fields) that is where it starts.
			if l := d.keys[prefix]; l > 0 {
				return &SpecError{Line: l, Field: joinPath(prefix, f.name), Msg: "required"}
			}
			return specErr(n, joinPath(prefix, f.name), "required")
		}
	}
	return nil
}

func lookupField(schema []specField, name string) *specField {
	for i := range schema {
		if schema[i].name == name {
			return &schema[i]
		}
	}
	return nil
}

func specFieldNames(schema []specField) string {
	var b bytes.Buffer
	for i, f := range schema {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.name)
	}
	return b.String()
}
