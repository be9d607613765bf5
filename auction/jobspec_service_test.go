package auction

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// serviceSpec is a service with every section: bronze replicas over a
// silver floor, autoscaled on QPS, one replica pinned to Europe.
var serviceSpec = []string{
	`name: chat`,
	`kind: service`,
	`image: gleaner-modelserver:dev`,
	`env: {MODELSERVER_LOAD_DELAY: 2s}`,
	`service:`,
	`  port: 8000`,
	`  readiness: {path: /health, initial_delay: 5s, period: 2s, timeout: 1s, failure_threshold: 3}`,
	`  replicas: {min: 2, max: 6}`,
	`  autoscale: {target_qps_per_replica: 2.5, scale_up_after: 30s, scale_down_after: 10m}`,
	`  floor: {tier: silver, replicas: 1, max_price: 1.2}`,
	`  replica_placement: [{regions: [eu], max_rtt_ms: 40}]`,
	`resources: {gpus: 1, min_vram_gb: 24}`,
	`tier: bronze`,
	`max_price: 0.40`,
	`duration: {max: 1d}`,
	`placement: {regions: [eu, na], max_rtt_ms: 80}`,
	`allow_simulated: true`,
}

func serviceWith(line int, repl string) []byte {
	lines := append([]string(nil), serviceSpec...)
	if line > 0 {
		lines[line-1] = repl
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

func TestParseServiceSpec(t *testing.T) {
	s, err := ParseJobSpec(serviceWith(0, ""))
	if err != nil {
		t.Fatal(err)
	}
	want := &Service{
		Port:             8000,
		Readiness:        Readiness{Path: "/health", InitialDelay: 5 * time.Second, Period: 2 * time.Second, Timeout: time.Second, FailureThreshold: 3},
		Replicas:         Replicas{Min: 2, Max: 6},
		Autoscale:        Autoscale{TargetQPS: 2500, ScaleUpAfter: 30 * time.Second, ScaleDownAfter: 10 * time.Minute},
		Floor:            Floor{Tier: Silver, Replicas: 1, MaxPrice: 1_200_000},
		ReplicaPlacement: []ReplicaPlacement{{Regions: []string{"eu"}, MaxRTT: 40 * time.Millisecond}},
	}
	if !reflect.DeepEqual(s.Service, want) {
		t.Fatalf("service\n%#v\nwant\n%#v", s.Service, want)
	}
	if !s.IsService() || s.Kind() != KindService || s.Workload != "service" || s.Duration.Expected != 24*time.Hour {
		t.Fatalf("kind %s, workload %s, expected %s", s.Kind(), s.Workload, s.Duration.Expected)
	}
	assertRoundTrip(t, s)
}

// TestServiceDefaults: the smallest service is one replica, checked at
// the Kubernetes defaults, and writes them out.
func TestServiceDefaults(t *testing.T) {
	y := "name: s\nkind: service\nimage: x\nservice: {port: 8000, readiness: {path: /health}}\nresources: {gpus: 1}\ntier: silver\nmax_price: 1\nduration: {max: 6h}\n"
	s, err := ParseJobSpec([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	want := &Service{Port: 8000, Readiness: Readiness{Path: "/health", Period: 10 * time.Second, Timeout: time.Second, FailureThreshold: 3},
		Replicas: Replicas{Min: 1, Max: 1}}
	if !reflect.DeepEqual(s.Service, want) {
		t.Fatalf("service %#v", s.Service)
	}
	assertRoundTrip(t, s)
	// Concurrency, default windows; a gold floor reserves a window.
	y = "name: s\nkind: service\nimage: x\nservice: {port: 80, readiness: {path: \"/ready?deep=1\"}, replicas: {max: 4}, autoscale: {target_concurrency: 8}, floor: {tier: gold}}\n" +
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1\nduration: {max: 6h}\nstart: 2026-12-01T20:00:00Z\nworkload: service\n"
	if s, err = ParseJobSpec([]byte(y)); err != nil {
		t.Fatal(err)
	}
	if a := s.Service.Autoscale; a != (Autoscale{TargetConcurrency: 8, ScaleUpAfter: DefaultScaleUpAfter, ScaleDownAfter: DefaultScaleDownAfter}) ||
		s.Service.Floor != (Floor{Tier: Gold, Replicas: 1, MaxPrice: 1_000_000}) || s.Service.Replicas != (Replicas{1, 4}) {
		t.Fatalf("service %#v", s.Service)
	}
	assertRoundTrip(t, s)
	// An explicit kind: batch is the default.
	b, err := ParseJobSpec(exampleWith(1, "name: finetune-small\nkind: batch"))
	if err != nil || b.IsService() || b.Kind() != KindBatch {
		t.Fatalf("kind: batch: %v %v", b, err)
	}
}

func TestParseServiceSpecErrors(t *testing.T) {
	for _, c := range []struct {
		name        string
		line        int // of serviceSpec to replace
		repl        string
		wantLine    int
		wantField   string
		wantMessage string
	}{
		{"no port", 6, "  # no port", 5, "service.port", "required"},
		{"port zero", 6, "  port: 0", 6, "service.port", "1..65535"},
		{"port too big", 6, "  port: 65536", 6, "service.port", "1..65535"},
		{"port quoted", 6, `  port: "8000"`, 6, "service.port", "whole number"},
		{"no readiness", 7, "  # no readiness", 5, "service.readiness", "required"},
		{"no readiness path", 7, "  readiness: {period: 2s}", 7, "service.readiness.path", "required"},
		{"relative path", 7, "  readiness: {path: health}", 7, "service.readiness.path", "absolute HTTP path"},
		{"scheme-relative path", 7, "  readiness: {path: //evil/health}", 7, "service.readiness.path", "absolute HTTP path"},
		{"path with a space", 7, `  readiness: {path: "/he alth"}`, 7, "service.readiness.path", "space"},
		{"path with a control", 7, `  readiness: {path: "/health\t"}`, 7, "service.readiness.path", "control"},
		{"path with a fragment", 7, `  readiness: {path: "/health#x"}`, 7, "service.readiness.path", "#"},
		{"path too long", 7, "  readiness: {path: /" + strings.Repeat("a", 256) + "}", 7, "service.readiness.path", "256 bytes"},
		{"initial delay too long", 7, "  readiness: {path: /h, initial_delay: 2h}", 7, "service.readiness.initial_delay", "0s to 1h"},
		{"period zero", 7, "  readiness: {path: /h, period: 0s}", 7, "service.readiness.period", "1s to 5m"},
		{"period fractional", 7, "  readiness: {path: /h, period: 1.5s}", 7, "service.readiness.period", "whole seconds"},
		{"period negative", 7, "  readiness: {path: /h, period: -5s}", 7, "service.readiness.period", "whole seconds"},
		{"timeout above period", 7, "  readiness: {path: /h, period: 2s, timeout: 5s}", 7, "service.readiness.timeout", "longer than service.readiness.period"},
		{"failure threshold", 7, "  readiness: {path: /h, failure_threshold: 0}", 7, "service.readiness.failure_threshold", "1..100"},
		{"min zero", 8, "  replicas: {min: 0, max: 6}", 8, "service.replicas.min", "1..32"},
		{"max too many", 8, "  replicas: {min: 2, max: 33}", 8, "service.replicas.max", "1..32"},
		{"max below min", 8, "  replicas: {min: 3, max: 2}", 8, "service.replicas.max", "below replicas.min"},
		{"autoscale without room", 8, "  replicas: {min: 2, max: 2}", 8, "service.replicas.max", "autoscale needs room"},
		{"max without autoscale", 9, "  # no autoscale", 8, "service.replicas.max", "only with autoscale"},
		{"both targets", 9, "  autoscale: {target_qps_per_replica: 2, target_concurrency: 4}", 9, "service.autoscale", "not both"},
		{"no target", 9, "  autoscale: {scale_up_after: 1m}", 9, "service.autoscale", "give target_qps_per_replica or target_concurrency"},
		{"qps zero", 9, "  autoscale: {target_qps_per_replica: 0}", 9, "service.autoscale.target_qps_per_replica", "0.001..100000"},
		{"qps 4 decimals", 9, "  autoscale: {target_qps_per_replica: 0.0001}", 9, "service.autoscale.target_qps_per_replica", "3 decimals"},
		{"qps exponent", 9, "  autoscale: {target_qps_per_replica: 1e3}", 9, "service.autoscale.target_qps_per_replica", "rate"},
		{"concurrency", 9, "  autoscale: {target_concurrency: 5000}", 9, "service.autoscale.target_concurrency", "1..4096"},
		{"scale up window", 9, "  autoscale: {target_concurrency: 4, scale_up_after: 5s}", 9, "service.autoscale.scale_up_after", "10s to 1h"},
		{"scale down window", 9, "  autoscale: {target_concurrency: 4, scale_down_after: 2d}", 9, "service.autoscale.scale_down_after", "10s to 24h"},
		{"bronze floor", 10, "  floor: {tier: bronze}", 10, "service.floor.tier", "no floor"},
		{"unknown floor tier", 10, "  floor: {tier: platinum}", 10, "service.floor.tier", "silver or gold"},
		{"floor without tier", 10, "  floor: {replicas: 1}", 10, "service.floor.tier", "required"},
		{"floor not above tier", 13, "tier: silver", 10, "service.floor.tier", "not above tier silver"},
		{"floor above min", 10, "  floor: {tier: silver, replicas: 3}", 10, "service.floor.replicas", "more than replicas.min"},
		{"floor price", 10, "  floor: {tier: silver, max_price: 0}", 10, "service.floor.max_price", "more than 0"},
		{"gold floor without start", 10, "  floor: {tier: gold}", 10, "start", "gold floor reserves a window"},
		{"placement not a list", 11, "  replica_placement: {regions: [eu]}", 11, "service.replica_placement", "want a list"},
		{"placement empty entry", 11, "  replica_placement: [{}]", 11, "service.replica_placement[0]", "give regions, max_rtt_ms or both"},
		{"placement unknown key", 11, "  replica_placement: [{region: eu}]", 11, "service.replica_placement[0].region", "unknown field"},
		{"placement bad region", 11, "  replica_placement: [{regions: [europe]}]", 11, "service.replica_placement[0].regions[0]", "continent"},
		{"placement outside", 11, "  replica_placement: [{regions: [as]}]", 11, "service.replica_placement[0].regions", "outside placement.regions"},
		{"placement looser rtt", 11, "  replica_placement: [{max_rtt_ms: 200}]", 11, "service.replica_placement[0].max_rtt_ms", "looser than placement.max_rtt_ms"},
		{"placement rtt zero", 11, "  replica_placement: [{max_rtt_ms: 0}]", 11, "service.replica_placement[0].max_rtt_ms", "1..10000"},
		{"placement too many", 11, "  replica_placement: [{regions: [eu]}, {regions: [eu]}, {regions: [eu]}, {regions: [eu]}, {regions: [eu]}, {regions: [eu]}, {regions: [na]}]", 11, "service.replica_placement", "7 entries for at most 6"},
		{"unknown service field", 11, "  ports: [8000]", 11, "service.ports", "unknown field"},
		{"kind without section", 0, "name: s\nkind: service\nimage: x\nresources: {gpus: 1}\ntier: silver\nmax_price: 1\nduration: {max: 6h}\n", 2, "service", "requires a service section"},
		{"null section", 0, "name: s\nkind: service\nimage: x\nservice:\nresources: {gpus: 1}\ntier: silver\nmax_price: 1\nduration: {max: 6h}\n", 4, "service", "requires a service section"},
		{"service on a batch spec", 0, "name: s\nimage: x\nservice: {port: 80, readiness: {path: /}}\nresources: {gpus: 1}\ntier: silver\nmax_price: 1\nduration: {max: 6h}\n", 3, "kind", "needs kind: service"},
		{"section without kind", 2, "# no kind", 5, "kind", "needs kind: service"},
		{"unknown kind", 2, "kind: cron", 2, "kind", "batch or service"},
		{"batch workload", 17, "workload: batch", 17, "workload", "service workload"},
		{"expected end", 15, "duration: {expected: 2h, max: 1d}", 15, "duration.expected", "whole lease"},
		{"too long", 15, "duration: {max: 31d}", 15, "duration.max", "exceeds"},
		{"outputs", 17, "outputs: {path: /outputs}", 17, "outputs", "no results"},
		{"checkpoint", 17, "checkpoint: {path: /ckpt}", 17, "checkpoint", "remove checkpoint"},
		{"verify", 17, "verify: {replicas: 2}", 17, "verify", "stdout"},
		{"canary", 17, "verify: {expect_sha256: " + strings.Repeat("ab", 32) + "}", 17, "verify", "stdout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := serviceWith(c.line, c.repl)
			if c.line == 0 {
				doc = []byte(c.repl) // a whole document
			}
			_, err := ParseJobSpec(doc)
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

// TestBatchSpecHashUnchanged pins the hashes of batch specs as they were
// before service specs existed (computed on the tree before kind and
// service were added): bids, leases and quotes signed then name these
// hashes, so a batch spec's canonical form must never change.
func TestBatchSpecHashUnchanged(t *testing.T) {
	for _, c := range []struct {
		name, hash string
		spec       []byte
	}{
		{"exampleSpec", "d915a815145cded77f1a1df5350569c552cc08ecc3456837e2487f75c09466f9", exampleWith(0, "")},
		{"spechash bronze", "e1baec5a07cc0a1704da0f1bf0aa19c8a81c3562040c57ea1d9857ec2cc55bc5",
			[]byte("name: t\nimage: img:1\ncommand: [run, \"--fast\"]\nenv: {B: \"2\", A: \"1\"}\nresources: {gpus: 1}\ntier: bronze\nmax_price: 1.0\nduration: {expected: 1m, max: 5m}\n")},
		{"inputs and outputs", "930d39bb2066430e905c3c8dab09beee7102a2343f5f954eeb8441d9befc75d6",
			exampleWith(12, "inputs: [{cid: "+inputCID+", path: /data}]\noutputs: {path: /outputs, max_size: 2GiB}")},
		{"explicit kind: batch", "d915a815145cded77f1a1df5350569c552cc08ecc3456837e2487f75c09466f9", exampleWith(1, "name: finetune-small\nkind: batch")},
		{"docs/examples/canary.yaml", "58d2ee43aa531fae374c0293a21c0af0f3279eb6ade3bec6862e396cc4137145", nil},
		{"docs/examples/demo-job.yaml", "6c048eaff2235525d21f525a3b71e715fb1b00bf894359f506cb01be6b141530", nil},
	} {
		y := c.spec
		if y == nil {
			var err error
			if y, err = os.ReadFile("../" + c.name); err != nil {
				t.Fatal(err)
			}
		}
		s, err := ParseJobSpec(y)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		h, err := SpecHash(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(h); got != c.hash {
			t.Errorf("%s: hash %s, pre-change %s", c.name, got, c.hash)
		}
	}
}

// TestServiceFieldsChangeTheHash: a provider runs a service by what its
// section says, so each field is in the hash; defaults written or left
// out are the same spec.
func TestServiceFieldsChangeTheHash(t *testing.T) {
	hash := func(y []byte) []byte {
		t.Helper()
		s, err := ParseJobSpec(y)
		if err != nil {
			t.Fatal(err)
		}
		h, err := SpecHash(s)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := hash(serviceWith(0, ""))
	for _, c := range []struct {
		line int
		repl string
	}{
		{6, "  port: 8001"},
		{7, "  readiness: {path: /healthz, initial_delay: 5s, period: 2s, timeout: 1s, failure_threshold: 3}"},
		{7, "  readiness: {path: /health, initial_delay: 6s, period: 2s, timeout: 1s, failure_threshold: 3}"},
		{7, "  readiness: {path: /health, initial_delay: 5s, period: 3s, timeout: 1s, failure_threshold: 3}"},
		{7, "  readiness: {path: /health, initial_delay: 5s, period: 2s, timeout: 2s, failure_threshold: 3}"},
		{7, "  readiness: {path: /health, initial_delay: 5s, period: 2s, timeout: 1s, failure_threshold: 4}"},
		{8, "  replicas: {min: 2, max: 7}"},
		{8, "  replicas: {min: 1, max: 6}"},
		{9, "  autoscale: {target_qps_per_replica: 2.6, scale_up_after: 30s, scale_down_after: 10m}"},
		{9, "  autoscale: {target_concurrency: 3, scale_up_after: 30s, scale_down_after: 10m}"},
		{9, "  autoscale: {target_qps_per_replica: 2.5, scale_up_after: 31s, scale_down_after: 10m}"},
		{9, "  autoscale: {target_qps_per_replica: 2.5, scale_up_after: 30s, scale_down_after: 11m}"},
		{10, "  floor: {tier: silver, replicas: 2, max_price: 1.2}"},
		{10, "  floor: {tier: silver, replicas: 1, max_price: 1.3}"},
		{10, "  # no floor"},
		{11, "  replica_placement: [{regions: [na], max_rtt_ms: 40}]"},
		{11, "  replica_placement: [{regions: [eu], max_rtt_ms: 41}]"},
		{11, "  # no replica_placement"},
	} {
		if bytes.Equal(base, hash(serviceWith(c.line, c.repl))) {
			t.Errorf("line %d -> %q: same hash", c.line, c.repl)
		}
	}
	same := serviceWith(7, "  readiness: {path: /health, initial_delay: 5s, period: 2s}")
	if !bytes.Equal(base, hash(same)) {
		t.Error("readiness defaults written and left out hash differently")
	}
}

// TestServiceExampleParses: the documented example is a valid spec.
func TestServiceExampleParses(t *testing.T) {
	b, err := os.ReadFile("../docs/examples/service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseJobSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsService() || s.Image != "gleaner-modelserver:dev" || s.Service.Port != 8000 || s.Service.Readiness.Path != "/health" {
		t.Fatalf("docs/examples/service.yaml: %+v", s.Service)
	}
	assertRoundTrip(t, s)
}

func TestMilliQPSString(t *testing.T) {
	for q, want := range map[MilliQPS]string{1: "0.001", 2500: "2.5", 3000: "3", 100_000_000: "100000", 1010: "1.01"} {
		if got := q.String(); got != want {
			t.Errorf("%d: %q, want %q", q, got, want)
		}
	}
}
