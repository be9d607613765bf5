package auction

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MarshalYAML writes the spec in the form ParseJobSpec reads, fields in
// document order and zero optional fields left out, so that a node can
// store or show a normalised spec and ParseJobSpec(yaml.Marshal(s)) equals s.
func (s *JobSpec) MarshalYAML() (any, error) {
	root := yMap()
	yAdd(root, "name", yStr(s.Name))
	// A batch spec writes no kind, so that its hash is what it was before
	// services existed and the leases that name it stay valid.
	if s.Service != nil {
		yAdd(root, "kind", yStr(KindService))
	}
	yAdd(root, "image", yStr(s.Image))
	if len(s.Command) > 0 {
		yAdd(root, "command", yStrList(s.Command, yaml.FlowStyle))
	}
	if len(s.Env) > 0 {
		env := yMap()
		for _, k := range sortedKeys(s.Env) {
			yAdd(env, k, yStr(s.Env[k]))
		}
		yAdd(root, "env", env)
	}
	if s.SecretsFile != "" {
		yAdd(root, "secrets_file", yStr(s.SecretsFile))
	}
	if s.RegistryAuthFile != "" {
		yAdd(root, "registry_auth_file", yStr(s.RegistryAuthFile))
	}
	encodeService(root, s.Service)
	res := yMap()
	res.Style = yaml.FlowStyle
	yAdd(res, "gpus", yInt(s.Resources.GPUs))
	yOptInt(res, "min_vram_gb", s.Resources.MinVRAMGB)
	if len(s.Resources.Models) > 0 {
		yAdd(res, "models", yStrList(s.Resources.Models, yaml.FlowStyle))
	}
	yOptInt(res, "cpus", s.Resources.CPUs)
	yOptInt(res, "memory_gb", s.Resources.MemoryGB)
	yAdd(root, "resources", res)
	yAdd(root, "tier", yStr(string(s.Tier)))
	yAdd(root, "max_price", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: FormatCredits(s.MaxPrice)})
	dur := yMap()
	dur.Style = yaml.FlowStyle
	yAdd(dur, "expected", yStr(durString(s.Duration.Expected)))
	yAdd(dur, "max", yStr(durString(s.Duration.Max)))
	yAdd(root, "duration", dur)
	if !s.Start.IsZero() {
		yAdd(root, "start", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!timestamp", Value: s.Start.UTC().Format(time.RFC3339)})
	}
	if p := s.Placement; len(p.Regions)+len(p.DenyCountries) > 0 || p.MaxRTT > 0 {
		pl := yMap()
		pl.Style = yaml.FlowStyle
		if len(p.Regions) > 0 {
			yAdd(pl, "regions", yStrList(p.Regions, yaml.FlowStyle))
		}
		if len(p.DenyCountries) > 0 {
			yAdd(pl, "deny_countries", yStrList(p.DenyCountries, yaml.FlowStyle))
		}
		yOptInt(pl, "max_rtt_ms", int(p.MaxRTT/time.Millisecond))
		yAdd(root, "placement", pl)
	}
	if len(s.Datasets) > 0 {
		yAdd(root, "datasets", yStrList(s.Datasets, 0))
	}
	if len(s.Inputs) > 0 {
		yAdd(root, "inputs", encodeInputs(s.Inputs))
	}
	encodeOutputs(root, s.Outputs)
	if s.Checkpoint.Path != "" {
		cp := yMap()
		cp.Style = yaml.FlowStyle
		yAdd(cp, "path", yStr(s.Checkpoint.Path))
		yAdd(root, "checkpoint", cp)
	}
	if r := s.Retry; r.MaxReauctions > 0 || len(r.OnExitCodes) > 0 {
		rt := yMap()
		rt.Style = yaml.FlowStyle
		yOptInt(rt, "max_reauctions", r.MaxReauctions)
		if len(r.OnExitCodes) > 0 {
			codes := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, c := range r.OnExitCodes {
				codes.Content = append(codes.Content, yInt(c))
			}
			yAdd(rt, "on_exit_codes", codes)
		}
		yAdd(root, "retry", rt)
	}
	yAdd(root, "workload", yStr(s.Workload))
	if v := s.Verify; v.Replicas > 1 || v.ExpectSHA256 != "" {
		vm := yMap()
		vm.Style = yaml.FlowStyle
		if v.Replicas > 1 {
			yOptInt(vm, "replicas", v.Replicas)
		}
		if v.ExpectSHA256 != "" {
			yAdd(vm, "expect_sha256", yStr(v.ExpectSHA256))
		}
		yAdd(root, "verify", vm)
	}
	if s.AllowSimulated {
		yAdd(root, "allow_simulated", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	encodeArray(root, s)
	encodeGang(root, s)
	return root, nil
}

// FormatCredits writes c as the shortest exact decimal: 600000 -> "0.6".
func FormatCredits(c Credits) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	frac := strings.TrimRight(strconv.FormatInt(int64(c%1_000_000)+1_000_000, 10)[1:], "0")
	whole := strconv.FormatInt(int64(c/1_000_000), 10)
	if frac == "" {
		return sign + whole
	}
	return sign + whole + "." + frac
}

// durString drops time.Duration.String's trailing zero units (2h0m0s -> 2h)
// so that a stored spec reads the way people write it.
func durString(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func yMap() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode} }

func yAdd(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, yStr(key), v)
}

func yStr(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }

func yInt(v int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
}

func yOptInt(m *yaml.Node, key string, v int) {
	if v != 0 {
		yAdd(m, key, yInt(v))
	}
}

func yStrList(vs []string, style yaml.Style) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: style}
	for _, v := range vs {
		n.Content = append(n.Content, yStr(v))
	}
	return n
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
