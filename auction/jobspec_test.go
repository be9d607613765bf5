package auction

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// exampleSpec is the documented example, as gold (start is gold-only).
var exampleSpec = []string{
	`name: finetune-small`,
	`image: registry.example/team/train:1.4`,
	`command: ["python", "train.py", "--ckpt", "/checkpoint"]`,
	`env: {EPOCHS: "3"}`,
	`secrets_file: ./secrets.env     # path; read by the node, sent to the provider only`,
	`resources: {gpus: 1, min_vram_gb: 24, models: [RTX4090, A100], cpus: 8, memory_gb: 32}`,
	`tier: gold                      # gold | silver | bronze`,
	`max_price: 0.60                 # credits per GPU-hour; never exceeded`,
	`duration: {expected: 2h, max: 6h}`,
	`start: 2026-12-01T20:00:00Z     # gold only: the reserved window's start`,
	`placement: {regions: [eu], deny_countries: [], max_rtt_ms: 80}`,
	`datasets: []`,
	`checkpoint: {path: /checkpoint}`,
	`retry: {max_reauctions: 3, on_exit_codes: [75]}`,
	`workload: batch                 # batch | service`,
	`allow_simulated: false          # accept simulated GPUs (local testnets)`,
	`verify: {expect_sha256: E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855}`,
}

func exampleWith(line int, repl string) []byte {
	lines := append([]string(nil), exampleSpec...)
	if line > 0 {
		lines[line-1] = repl
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

func TestParseJobSpecExample(t *testing.T) {
	s, err := ParseJobSpec(exampleWith(0, ""))
	if err != nil {
		t.Fatal(err)
	}
	want := &JobSpec{
		Name: "finetune-small", Image: "registry.example/team/train:1.4",
		Command:     []string{"python", "train.py", "--ckpt", "/checkpoint"},
		Env:         map[string]string{"EPOCHS": "3"},
		SecretsFile: "./secrets.env",
		Resources:   Resources{GPUs: 1, MinVRAMGB: 24, Models: []string{"RTX4090", "A100"}, CPUs: 8, MemoryGB: 32},
		Tier:        Gold, MaxPrice: 600_000,
		Duration:   JobDuration{Expected: 2 * time.Hour, Max: 6 * time.Hour},
		Start:      time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC),
		Placement:  Placement{Regions: []string{"eu"}, DenyCountries: []string{}, MaxRTT: 80 * time.Millisecond},
		Datasets:   []string{},
		Checkpoint: Checkpoint{Path: "/checkpoint"},
		Retry:      Retry{MaxReauctions: 3, OnExitCodes: []int{75}},
		Workload:   "batch",
		Verify:     Verify{ExpectSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("parsed\n%#v\nwant\n%#v", s, want)
	}
	assertRoundTrip(t, s)
}

// assertRoundTrip checks that MarshalYAML writes what ParseJobSpec reads
// back unchanged (empty lists are left out, so they come back as nil).
func assertRoundTrip(t testing.TB, s *JobSpec) {
	t.Helper()
	out, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseJobSpec(out)
	if err != nil {
		t.Fatalf("re-parse of\n%s: %v", out, err)
	}
	norm := func(s *JobSpec) JobSpec {
		c := *s
		for _, l := range []*[]string{&c.Command, &c.Datasets, &c.Resources.Models, &c.Placement.Regions, &c.Placement.DenyCountries} {
			if len(*l) == 0 {
				*l = nil
			}
		}
		if len(c.Env) == 0 {
			c.Env = nil
		}
		if len(c.Retry.OnExitCodes) == 0 {
			c.Retry.OnExitCodes = nil
		}
		if c.Service != nil && len(c.Service.ReplicaPlacement) == 0 {
			sv := *c.Service
			sv.ReplicaPlacement = nil
			c.Service = &sv
		}
		return c
	}
	if a, b := norm(s), norm(again); !reflect.DeepEqual(a, b) {
		t.Fatalf("round trip changed the spec:\n%s\n%#v\n%#v", out, a, b)
	}
}

func TestParseJobSpecErrors(t *testing.T) {
	for _, c := range []struct {
		name        string
		line        int // of exampleSpec to replace
		repl        string
		wantLine    int
		wantField   string
		wantMessage string
	}{
		{"gpus out of range, block style", 6, "resources:\n  gpus: 0", 7, "resources.gpus", "must be a whole number 1..16"},
		{"gpus too many", 6, "resources: {gpus: 17}", 6, "resources.gpus", "1..16"},
		{"gpus quoted", 6, `resources: {gpus: "1"}`, 6, "resources.gpus", "whole number"},
		{"gpus missing", 6, "resources: {cpus: 8}", 6, "resources.gpus", "required"},
		{"unknown nested field", 6, "resources: {gpus: 1, vram: 24}", 6, "resources.vram", "unknown field"},
		{"duplicate model", 6, "resources: {gpus: 1, models: [A100, a100]}", 6, "resources.models[1]", "repeated"},
		{"bad model", 6, "resources: {gpus: 1, models: [A100 80GB]}", 6, "resources.models[0]", "not a GPU model"},
		{"bad name", 1, "name: fine tune!", 1, "name", "want 1..64"},
		{"image upper-case path", 2, "image: registry.example/Team/train:1.4", 2, "image", "not an image reference"},
		{"image empty tag", 2, `image: "train:"`, 2, "image", "not an image reference"},
		{"image missing", 2, "# no image", 1, "image", "required"},
		{"command not a list", 3, "command: python train.py", 3, "command", "want a list"},
		{"env key", 4, "env: {1EPOCHS: 3}", 4, "env.1EPOCHS", "not a variable name"},
		{"env GPU choice", 4, "env:\n  EPOCHS: 3\n  NVIDIA_VISIBLE_DEVICES: all", 6, "env.NVIDIA_VISIBLE_DEVICES", "provider sets which GPUs"},
		{"env GPU capabilities", 4, "env: {NVIDIA_DRIVER_CAPABILITIES: all}", 4, "env.NVIDIA_DRIVER_CAPABILITIES", "provider sets which GPUs"},
		{"env reserved prefix", 4, "env: {GLEANER_GPU_UUIDS: GPU-1}", 4, "env.GLEANER_GPU_UUIDS", "reserved"},
		{"env nested", 4, "env: {EPOCHS: [3]}", 4, "env.EPOCHS", "single value"},
		{"tier", 7, "tier: platinum", 7, "tier", "gold, silver or bronze"},
		{"price 7 decimals", 8, "max_price: 0.6000001", 8, "max_price", "6 fractional"},
		{"price negative", 8, "max_price: -1", 8, "max_price", "decimal"},
		{"price zero", 8, "max_price: 0", 8, "max_price", "more than 0"},
		{"price exponent", 8, "max_price: 6e-1", 8, "max_price", "decimal"},
		{"expected above max", 9, "duration: {expected: 7h, max: 6h}", 9, "duration.expected", "longer than duration.max"},
		{"max above 30 days", 9, "duration: {max: 721h}", 9, "duration.max", "exceeds"},
		{"max without unit", 9, "duration: {max: 90}", 9, "duration.max", "positive duration"},
		{"max missing", 9, "duration: {expected: 2h}", 9, "duration.max", "required"},
		{"gold without start", 10, "# no start", 7, "start", "requires start"},
		{"start on bronze", 7, "tier: bronze", 10, "start", "only gold"},
		{"start not a time", 10, "start: tomorrow evening", 10, "start", "RFC 3339"},
		{"region", 11, "placement: {regions: [europe]}", 11, "placement.regions[0]", "continent"},
		{"country not ISO", 11, "placement: {deny_countries: [DE, UK]}", 11, "placement.deny_countries[1]", "ISO 3166"},
		{"rtt with unit", 11, "placement: {max_rtt_ms: 80ms}", 11, "placement.max_rtt_ms", "whole number"},
		{"dataset in block list", 12, "datasets:\n  - bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi\n  - not-a-cid", 14, "datasets[1]", "not a CID"},
		{"checkpoint relative", 13, "checkpoint: {path: ckpt}", 13, "checkpoint.path", "absolute"},
		{"exit code 0", 14, "retry: {on_exit_codes: [0]}", 14, "retry.on_exit_codes[0]", "1..255"},
		{"reauctions", 14, "retry: {max_reauctions: 1000}", 14, "retry.max_reauctions", "0..100"},
		{"replicas", 17, "verify: {replicas: 4}", 17, "verify.replicas", "1..3"},
		{"known answer", 17, "verify: {expect_sha256: abc}", 17, "verify.expect_sha256", "64 hex digits"},
		{"both checks", 17, "verify: {replicas: 2, expect_sha256: " + strings.Repeat("ab", 32) + "}", 17, "verify", "not both"},
		{"workload", 15, "workload: cron", 15, "workload", "batch, service"},
		{"simulated yes", 16, "allow_simulated: yes", 16, "allow_simulated", "true or false"},
		{"unknown top-level", 16, "colour: red", 16, "colour", "unknown field"},
		{"repeated field", 16, "name: again", 16, "name", "repeated"},
		{"anchor", 6, "resources: &r {gpus: 1}", 6, "(document)", "anchors"},
		{"syntax", 2, "image: train:", 2, "(syntax)", "mapping values are not allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseJobSpec(exampleWith(c.line, c.repl))
			var se *SpecError
			if !errors.As(err, &se) || !errors.Is(err, ErrBadJobSpec) {
				t.Fatalf("got %v, want a *SpecError", err)
			}
			if se.Line != c.wantLine || se.Field != c.wantField || !strings.Contains(se.Msg, c.wantMessage) {
				t.Fatalf("got %q, want line %d field %s message containing %q", err, c.wantLine, c.wantField, c.wantMessage)
			}
		})
	}
}

// TestParseJobSpecGPUEnv: CUDA_VISIBLE_DEVICES only narrows the GPUs a
// container has, so a spec may set it, unlike NVIDIA_VISIBLE_DEVICES.
func TestParseJobSpecGPUEnv(t *testing.T) {
	s, err := ParseJobSpec(exampleWith(4, `env: {CUDA_VISIBLE_DEVICES: "0", NVIDIA_TF32_OVERRIDE: "0"}`))
	if err != nil || s.Env["CUDA_VISIBLE_DEVICES"] != "0" {
		t.Fatalf("%v %v", s, err)
	}
}

func TestParseJobSpecDocument(t *testing.T) {
	for _, doc := range []string{"", "- a\n- b\n", "name: a\n---\nname: b\n", strings.Repeat("#", MaxJobSpecBytes+1)} {
		if _, err := ParseJobSpec([]byte(doc)); !errors.Is(err, ErrBadJobSpec) {
			t.Errorf("%.40q: got %v, want ErrBadJobSpec", doc, err)
		}
	}
}

func TestJobSpecFieldsDocumentEveryField(t *testing.T) {
	docs := JobSpecFields()
	seen := map[string]bool{}
	for _, f := range docs {
		if f.Help == "" || f.Type == "" {
			t.Errorf("%s: undocumented", f.Name)
		}
		seen[f.Name] = true
	}
	for _, name := range []string{"name", "image", "resources.gpus", "resources.min_vram_gb", "max_price", "duration.max",
		"start", "placement.max_rtt_ms", "retry.on_exit_codes", "allow_simulated"} {
		if !seen[name] {
			t.Errorf("%s missing from JobSpecFields", name)
		}
	}
	if tbl := JobSpecTable(); strings.Count(tbl, "\n") != len(docs)+2 {
		t.Errorf("table has %d lines for %d fields", strings.Count(tbl, "\n"), len(docs))
	}
}

func TestImageAllowlist(t *testing.T) {
	for _, c := range []struct {
		image, pattern string
		ok             bool
	}{
		{"registry.example/team/train:1.4", "registry.example/team/*", true},
		{"registry.example/team/train:1.4", "registry.example/team/train", true},
		{"registry.example/team/train:1.4", "registry.example/team/train:1.*", true},
		{"registry.example/team/train:1.4", "registry.example/*", false}, // * does not cross /
		{"registry.example/other/train:1.4", "registry.example/team/*", false},
		{"ubuntu:24.04", "docker.io/library/*", true},
		{"ubuntu:24.04", "ubuntu", true},
		{"localhost:5000/x:1", "localhost:5000/*", true},
		{"evil.example/team/train:1", "registry.example/team/*", false},
		{"registry.example/team/train:1", "[", false}, // malformed pattern allows nothing
	} {
		if got := imageAllowed([]string{c.pattern}, imageNames(c.image)); got != c.ok {
			t.Errorf("%s against %s: got %v, want %v", c.image, c.pattern, got, c.ok)
		}
	}
}

func FuzzParseJobSpec(f *testing.F) {
	f.Add(exampleWith(0, ""))
	f.Add(exampleWith(6, "resources:\n  gpus: 2\n  models: [H100]"))
	f.Add(exampleWith(7, "tier: bronze\nstart: "))
	f.Add([]byte("name: x\nimage: a\nresources: {gpus: 1}\ntier: bronze\nmax_price: 1\nduration: {max: 1h}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add(serviceWith(0, ""))
	f.Add(serviceWith(9, "  autoscale: {target_concurrency: 4}"))
	f.Add([]byte("name: s\nkind: service\nimage: x\nservice: {port: 8000, readiness: {path: /health}}\nresources: {gpus: 1}\ntier: silver\nmax_price: 1\nduration: {max: 6h}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseJobSpec(data)
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) || s != nil {
				t.Fatalf("error %v is not a *SpecError, or spec returned with it", err)
			}
			return
		}
		if s.Resources.GPUs < 1 || s.Resources.GPUs > maxJobGPUs || s.MaxPrice <= 0 ||
			s.Duration.Expected > s.Duration.Max || (s.Tier == Gold) == s.Start.IsZero() {
			t.Fatalf("accepted an invalid spec: %+v", s)
		}
		if sv := s.Service; sv != nil {
			r := sv.Replicas
			if sv.Port < 1 || sv.Port > 65535 || sv.Readiness.Path == "" || sv.Readiness.Period <= 0 || sv.Readiness.Timeout > sv.Readiness.Period ||
				r.Min < 1 || r.Max < r.Min || r.Max > MaxServiceReplicas || sv.Autoscale.Enabled() != (r.Max > r.Min) ||
				sv.Floor.Tier != "" && (tierRank(sv.Floor.Tier) <= tierRank(s.Tier) || sv.Floor.Replicas > r.Min || sv.Floor.Replicas >= r.Max) ||
				s.Workload != "service" || s.Outputs.Path != "" || s.Checkpoint.Path != "" || s.Duration.Expected != s.Duration.Max {
				t.Fatalf("accepted an invalid service: %+v", sv)
			}
		}
		assertRoundTrip(t, s)
	})
}

// A start written ahead ("+2h") is resolved against the clock once, and
// says so, so that whoever keeps the spec keeps the instant (its
// normalised form) rather than a time that moves; a start ahead out of
// range is refused with the forms that work. The examples in docs parse.
func TestRelativeStart(t *testing.T) {
	before := time.Now()
	s, err := ParseJobSpec([]byte("name: r\nimage: x\nresources: {gpus: 1}\ntier: gold\nstart: \"+2h\"\nmax_price: 1\nduration: {expected: 1h, max: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.StartWasRelative() || s.Start.Before(before.Add(2*time.Hour-time.Second)) || s.Start.After(time.Now().Add(2*time.Hour)) {
		t.Fatalf("start %v (relative %v), want two hours from now", s.Start, s.StartWasRelative())
	}
	norm, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseJobSpec(norm)
	if err != nil || again.StartWasRelative() || !again.Start.Equal(s.Start) {
		t.Fatalf("the normalised spec reads back as %v (relative %v): %v\n%s", again.Start, again.StartWasRelative(), err, norm)
	}
	for _, bad := range []string{"+0s", "+-2h", "+2x", "+9700h"} {
		_, err := ParseJobSpec([]byte("name: r\nimage: x\nresources: {gpus: 1}\ntier: gold\nstart: \"" + bad + "\"\nmax_price: 1\nduration: {expected: 1h, max: 1h}\n"))
		if err == nil || !strings.Contains(err.Error(), "+2h") {
			t.Errorf("start %q: %v, want a refusal naming the forms that work", bad, err)
		}
	}
	for _, f := range []string{"canary.yaml", "demo-job.yaml", "reserve.yaml"} {
		b, err := os.ReadFile("../docs/examples/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseJobSpec(b); err != nil {
			t.Errorf("docs/examples/%s: %v", f, err)
		}
	}
}
