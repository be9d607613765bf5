package auction

import (
	"strconv"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"gopkg.in/yaml.v3"
)

type setFunc = func(d *specDecoder, path string, n *yaml.Node) error

// jobSpecSchema is the job spec's vocabulary in document order. Each row
// decodes and validates one field where its value is; checks that involve
// two fields are in crossChecks.
var jobSpecSchema = []specField{
	{name: "name", typ: "string", required: true, help: "a label for the renter: 1..64 of A-Z a-z 0-9 . _ -",
		set: strVal(func(s *JobSpec) *string { return &s.Name }, validName)},
	{name: "kind", typ: "string", def: "batch", help: "batch (runs to its end) or service (serves on a port as replicas until stopped; requires service, and is a service workload)",
		set: setKind},
	{name: "image", typ: "string", required: true, help: "OCI image reference, [registry/]path[:tag][@digest]",
		set: strVal(func(s *JobSpec) *string { return &s.Image }, validImage)},
	{name: "command", typ: "list of strings", def: "the image's entrypoint", help: "argv of the container's process",
		set: listVal(func(s *JobSpec) *[]string { return &s.Command }, maxSpecList, false, validArg)},
	{name: "env", typ: "mapping", help: "environment variables; keys [A-Za-z_][A-Za-z0-9_]*, values taken as written; not GLEANER_* nor the NVIDIA_VISIBLE_DEVICES family, which the provider sets (CUDA_VISIBLE_DEVICES is allowed)", set: setEnv},
	{name: "secrets_file", typ: "path", help: "KEY=VALUE file read by the renter's node and sent to the provider only, never gossiped or logged",
		set: strVal(func(s *JobSpec) *string { return &s.SecretsFile }, validArg)},
	{name: "registry_auth_file", typ: "path", help: "credentials for a private image (lines username=, password= or identity_token=, and optionally server=), relative to the spec; read by the CLI, sent to the winning provider only, never stored or logged",
		set: strVal(func(s *JobSpec) *string { return &s.RegistryAuthFile }, validArg)},
	{name: "service", typ: "mapping", help: "kind: service only: the port, readiness check and replicas (see docs/SERVICES.md); resources, tier and max_price are per replica, duration.max is each replica's lease", sub: serviceSchema},
	{name: "resources", typ: "mapping", required: true, help: "what one lease needs", sub: []specField{
		{name: "gpus", typ: "integer", required: true, help: "GPUs, 1..16, all on one provider",
			set: intVal(func(s *JobSpec) *int { return &s.Resources.GPUs }, 1, maxJobGPUs)},
		{name: "min_vram_gb", typ: "integer", def: "0 (any)", help: "memory per GPU in GB of 10^9 bytes, as cards are sold (an 80 GB H100 reports 81559 MiB)",
			set: intVal(func(s *JobSpec) *int { return &s.Resources.MinVRAMGB }, 0, maxResourceCount)},
		{name: "models", typ: "list of strings", def: "any", help: "acceptable GPU models, case-insensitive (H100, A100-80GB, RTX4090); a near miss of a known model (RTX4O90) is an error, an unlisted board is not",
			set: listVal(func(s *JobSpec) *[]string { return &s.Resources.Models }, maxSpecList, true, validModel)},
		{name: "cpus", typ: "integer", def: "0 (any)", help: "host CPU cores",
			set: intVal(func(s *JobSpec) *int { return &s.Resources.CPUs }, 0, maxResourceCount)},
		{name: "memory_gb", typ: "integer", def: "0 (any)", help: "host memory in GB of 10^9 bytes",
			set: intVal(func(s *JobSpec) *int { return &s.Resources.MemoryGB }, 0, maxResourceCount)},
	}},
	{name: "tier", typ: "string", required: true, help: "gold (reserved window), silver (on demand, never preempted) or bronze (preemptible)",
		set: setTier},
	{name: "max_price", typ: "decimal", required: true, help: "credits per GPU-hour, at most 6 decimals; the price paid never exceeds it",
		set: setMaxPrice},
	{name: "duration", typ: "mapping", required: true, help: "how long the job runs", sub: []specField{
		{name: "expected", typ: "duration", def: "max", help: "duration (90m, 1h30m, 2d); for the provider's planning; at most max",
			set: durVal(func(s *JobSpec) *time.Duration { return &s.Duration.Expected })},
		{name: "max", typ: "duration", required: true, help: "duration (6h, 2d), at most 30d (720h); the lease's length",
			set: durVal(func(s *JobSpec) *time.Duration { return &s.Duration.Max })},
	}},
	{name: "start", typ: "timestamp", def: "none", help: "RFC 3339, or a time ahead such as `+2h` or `+1d` (resolved once, at submit); required for gold and only allowed there: the reserved window's start (see \"Gold: reserving a window\")",
		set: setStart},
	{name: "placement", typ: "mapping", help: "where the job may run", sub: []specField{
		{name: "regions", typ: "list of strings", def: "anywhere", help: "continent codes: " + strings.Join(Continents, " "),
			set: listVal(func(s *JobSpec) *[]string { return &s.Placement.Regions }, len(Continents), true, validRegion)},
		{name: "deny_countries", typ: "list of strings", def: "none", help: "ISO 3166-1 alpha-2 codes the job must not run in",
			set: listVal(func(s *JobSpec) *[]string { return &s.Placement.DenyCountries }, maxSpecList, true, validCountry)},
		{name: "max_rtt_ms", typ: "integer", def: "0 (no limit)", help: "round trip from the renter's node in ms, 0..10000",
			set: setMaxRTT},
	}},
	{name: "datasets", typ: "list of CIDs", def: "none", help: "inputs; providers that cache them rank higher",
		set: listVal(func(s *JobSpec) *[]string { return &s.Datasets }, MaxDatasets, true, validDataset)},
	{name: "inputs", typ: "list of mappings", def: "none", help: "files the job reads, mounted read-only before it starts: `{cid: bafy..., path: /data}` (a DAG from any peer) or `{src: ./data, path: /data}` (a path here, imported at submit; relative to the spec file); at most 16, paths absolute and apart, not under /tmp /dev /proc /sys /etc",
		set: setInputs},
	{name: "outputs", typ: "mapping", help: "the job's results, returned by CID when it ends (`gleaner job fetch`)", sub: []specField{
		{name: "path", typ: "path", def: "none", help: "absolute, clean path the job writes its results under, apart from the inputs and the checkpoint",
			set: setOutputPath},
		{name: "max_size", typ: "size", def: "1GiB", help: "the volume's quota, 1MiB..64GiB, such as 512MiB or 10GiB; held in the provider's memory until the job ends, and counted in the job's",
			set: setOutputSize},
	}},
	{name: "checkpoint", typ: "mapping", help: "state that survives preemption and re-auction", sub: []specField{
		{name: "path", typ: "path", def: "none", help: "absolute, clean path inside the container",
			set: strVal(func(s *JobSpec) *string { return &s.Checkpoint.Path }, validCheckpoint)},
	}},
	{name: "retry", typ: "mapping", help: "when a job is auctioned again", sub: []specField{
		{name: "max_reauctions", typ: "integer", def: "0", help: "re-auctions after a lost provider or a retryable exit (a preemption spends none), 0..100",
			set: intVal(func(s *JobSpec) *int { return &s.Retry.MaxReauctions }, 0, maxReauctions)},
		{name: "on_exit_codes", typ: "list of integers", def: "none", help: "exit codes 1..255 that mean retry",
			set: setExitCodes},
	}},
	{name: "workload", typ: "string", def: "batch (service for kind: service)", help: "batch or service; the provider's policy must allow it",
		set: strVal(func(s *JobSpec) *string { return &s.Workload }, validWorkload)},
	{name: "allow_simulated", typ: "bool", def: "false", help: "accept simulated GPUs (local testnets only)", set: setAllowSimulated},
	{name: "verify", typ: "mapping", help: "check the provider's work by its stdout's sha256; results become probe entries", sub: []specField{
		{name: "replicas", typ: "integer", def: "1", help: "run on this many different providers, 1..3, and compare: the majority passes, the rest fail",
			set: intVal(func(s *JobSpec) *int { return &s.Verify.Replicas }, 1, MaxReplicas)},
		{name: "expect_sha256", typ: "string", def: "none", help: "known answer (a canary): 64 hex digits; a different output fails the job",
			set: strVal(func(s *JobSpec) *string { return &s.Verify.ExpectSHA256 }, validSHA256)},
	}},
	{name: "array", typ: "mapping", help: "kind: batch only: run the job as this many shards, each a job of its own (see \"Job arrays\")", sub: arraySchema},
	{name: "shard", typ: "mapping", help: "written by the renter's node into each shard's spec, never by hand: which shard of its array this job is", sub: shardSchema},
	{name: "gang", typ: "mapping", help: "kind: batch only: run the job on this many providers at once, all or none (see \"Gangs\")", sub: gangSchema},
	{name: "gang_of", typ: "mapping", help: "written by the renter's node into each member's spec, never by hand: which member of its gang this job is", sub: gangOfSchema},
}

// text reads a scalar as written: 0.60 stays "0.60", not a float.
func text(path string, n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", specErr(n, path, "want a single value, got a %s", kindName(n.Kind))
	}
	if len(n.Value) > maxSpecString {
		return "", specErr(n, path, "longer than %d bytes", maxSpecString)
	}
	return n.Value, nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	}
	return "value"
}

// strVal decodes one string; valid checks it and may normalise it.
func strVal(field func(*JobSpec) *string, valid func(string) (string, error)) setFunc {
	return func(d *specDecoder, path string, n *yaml.Node) error {
		v, err := text(path, n)
		if err != nil {
			return err
		}
		norm, verr := valid(v)
		if verr != nil {
			return specErr(n, path, "%v", verr)
		}
		*field(d.s) = norm
		return nil
	}
}

func integer(path string, n *yaml.Node, lo, hi int) (int, error) {
	v, err := text(path, n)
	if err != nil {
		return 0, err
	}
	i, perr := strconv.Atoi(v)
	if perr != nil || n.Tag != "!!int" || i < lo || i > hi {
		return 0, specErr(n, path, "must be a whole number %d..%d, got %q", lo, hi, v)
	}
	return i, nil
}

func intVal(field func(*JobSpec) *int, lo, hi int) setFunc {
	return func(d *specDecoder, path string, n *yaml.Node) error {
		i, err := integer(path, n, lo, hi)
		*field(d.s) = i
		return err
	}
}

func durVal(field func(*JobSpec) *time.Duration) setFunc {
	return func(d *specDecoder, path string, n *yaml.Node) error {
		v, err := text(path, n)
		if err != nil {
			return err
		}
		t, perr := ParseDuration(v)
		if perr != nil || t <= 0 || t%time.Second != 0 {
			return specErr(n, path, "want a positive duration in whole seconds such as 90m, 6h or 2d, got %q", v)
		}
		if t > MaxJobDuration {
			return specErr(n, path, "%s exceeds the limit of %s (30 days)", v, MaxJobDuration)
		}
		*field(d.s) = t
		return nil
	}
}

// listVal decodes a list of strings; valid may normalise each (regions to
// lower case, countries to upper case). unique refuses repeats after
// normalisation, which are almost always a typo.
func listVal(field func(*JobSpec) *[]string, max int, unique bool, valid func(string) (string, error)) setFunc {
	return func(d *specDecoder, path string, n *yaml.Node) error {
		if n.Kind != yaml.SequenceNode {
			return specErr(n, path, "want a list")
		}
		if len(n.Content) > max {
			return specErr(n, path, "%d entries, limit %d", len(n.Content), max)
		}
		out := make([]string, 0, len(n.Content))
		for i, e := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			v, err := text(p, e)
			if err != nil {
				return err
			}
			norm, verr := valid(v)
			if verr != nil {
				return specErr(e, p, "%v", verr)
			}
			if unique && containsFold(out, norm) {
				return specErr(e, p, "%q repeated", v)
			}
			out = append(out, norm)
		}
		*field(d.s) = out
		return nil
	}
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func setEnv(d *specDecoder, path string, n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return specErr(n, path, "want a mapping of NAME: value")
	}
	if len(n.Content)/2 > maxSpecList {
		return specErr(n, path, "%d entries, limit %d", len(n.Content)/2, maxSpecList)
	}
	env := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key, err := text(path, k)
		if err != nil {
			return err
		}
		p := path + "." + key
		if !validEnvKey(key) {
			return specErr(k, p, "not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
		}
		if strings.HasPrefix(key, ReservedEnvPrefix) {
			// The executor sets these (simulated GPUs, GPU UUIDs, the
			// checkpoint path) and refuses a spec that names them; refusing
			// here saves a renter a lease it paid for and cannot use.
			return specErr(k, p, "the %s prefix is reserved for what the provider tells the job", ReservedEnvPrefix)
		}
		if attest.IsGPURuntimeEnv(key) {
			// The NVIDIA Container Toolkit reads these to choose the
			// container's devices; the provider's executor sets them to
			// the leased GPUs and refuses a spec that names them.
			return specErr(k, p, "the provider sets which GPUs the job sees (its leased ones, by UUID); use CUDA_VISIBLE_DEVICES to narrow them")
		}
		if _, dup := env[key]; dup {
			return specErr(k, p, "repeated")
		}
		val, err := text(p, v)
		if err != nil {
			return err
		}
		if strings.IndexByte(val, 0) >= 0 {
			return specErr(v, p, "contains a NUL byte")
		}
		env[key] = val
	}
	d.s.Env = env
	return nil
}

func setTier(d *specDecoder, path string, n *yaml.Node) error {
	v, err := text(path, n)
	if err != nil {
		return err
	}
	t := Tier(v)
	if t != Gold && t != Silver && t != Bronze {
		return specErr(n, path, "%q: want gold, silver or bronze", v)
	}
	d.s.Tier = t
	return nil
}

func setMaxPrice(d *specDecoder, path string, n *yaml.Node) error {
	p, err := specPrice(path, n)
	if err != nil {
		return err
	}
	d.s.MaxPrice = p
	return nil
}

// specPrice reads a price per GPU-hour (max_price, service.floor.max_price):
// more than 0 and at most maxPrice, with the field's line in any error.
func specPrice(path string, n *yaml.Node) (Credits, error) {
	v, err := text(path, n)
	if err != nil {
		return 0, err
	}
	p, perr := parseMicro(v)
	if perr != nil {
		return 0, specErr(n, path, "%v", perr)
	}
	if p <= 0 || Credits(p) > maxPrice {
		return 0, specErr(n, path, "must be more than 0 and at most %d credits", maxPrice/1_000_000)
	}
	return Credits(p), nil
}

func setStart(d *specDecoder, path string, n *yaml.Node) error {
	v, err := text(path, n)
	if err != nil {
		return err
	}
	if rel, ok := strings.CutPrefix(v, "+"); ok {
		dur, perr := ParseDuration(rel)
		if perr != nil || dur < time.Second || dur > maxStartAhead {
			return specErr(n, path, "want a time ahead such as +90s, +2h or +2d (at most %s), got %q", maxStartAhead, v)
		}
		d.s.Start, d.s.relStart = time.Now().Add(dur).Truncate(time.Second).UTC(), true
		return nil
	}
	t, perr := time.Parse(time.RFC3339, v)
	if perr != nil || t.Nanosecond() != 0 || t.Year() < 2000 || t.Year() > 9999 {
		return specErr(n, path, "want an RFC 3339 time in whole seconds such as 2026-12-01T20:00:00Z, or a time ahead such as +2h, got %q", v)
	}
	d.s.Start = t.UTC()
	return nil
}

// maxStartAhead bounds a relative start: a reservation is at most this far
// ahead (the reach of an owner's calendar).
const maxStartAhead = 400 * 24 * time.Hour

func setMaxRTT(d *specDecoder, path string, n *yaml.Node) error {
	ms, err := integer(path, n, 0, maxRTTMillis)
	d.s.Placement.MaxRTT = time.Duration(ms) * time.Millisecond
	return err
}
