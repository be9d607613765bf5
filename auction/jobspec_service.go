package auction

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// A job spec is of one of two kinds. A batch job runs to its end; a
// service (kind: service, with a service: section) listens on a port and
// runs as replicas until stopped, each replica a lease of its own.
const (
	KindBatch   = "batch"
	KindService = "service"
)

// Kinds are the values of a spec's kind field.
var Kinds = []string{KindBatch, KindService}

// Service is what a service spec adds to a job: how the renter's node
// reaches each replica, knows it is ready, and how many to run where.
// Every replica runs the spec's image, command, env and resources, and is
// auctioned as a job of its own; resources are per replica.
type Service struct {
	Port      int       // port: the TCP port the container listens on, 1..65535
	Readiness Readiness // readiness: the HTTP check that says a replica may take traffic
	Replicas  Replicas  // replicas
	Autoscale Autoscale // autoscale: zero (Enabled false) when absent
	Floor     Floor     // floor: zero (Replicas 0) when absent
	// replica_placement: entry i narrows where replica i runs (the floor's
	// replicas first), on top of the spec's placement, which binds them all
	ReplicaPlacement []ReplicaPlacement
	// gateway: where the renter's node serves the service (never sent to
	// a provider; jobspec_gateway.go)
	Gateway ServiceGateway
}

// Readiness is an HTTP GET on the replica's port: any 2xx answer within
// Timeout is ready; FailureThreshold misses in a row make it not ready.
type Readiness struct {
	Path             string        // path: absolute HTTP path such as /health
	InitialDelay     time.Duration // initial_delay: before the first check; 0 checks at once
	Period           time.Duration // period: between checks
	Timeout          time.Duration // timeout: for one check's answer, at most Period
	FailureThreshold int           // failure_threshold: misses in a row that make a replica not ready
}

// Replicas bounds how many replicas run; Min always, up to Max under load.
type Replicas struct {
	Min int // min: 1..MaxServiceReplicas
	Max int // max: Min..MaxServiceReplicas; above Min only with autoscale
}

// Autoscale adds and removes replicas, between Replicas.Min and Max, to
// keep the load per ready replica near one target (exactly one of the two
// is set). A change needs the load past its target for the whole window:
// ScaleUpAfter to add a replica, ScaleDownAfter to remove one, so that a
// burst or a lull does not make replicas come and go.
type Autoscale struct {
	TargetQPS         MilliQPS      // target_qps_per_replica: requests per second per ready replica
	TargetConcurrency int           // target_concurrency: requests in flight per ready replica
	ScaleUpAfter      time.Duration // scale_up_after
	ScaleDownAfter    time.Duration // scale_down_after
}

// Enabled reports that the spec asked for autoscaling.
func (a Autoscale) Enabled() bool { return a.TargetQPS > 0 || a.TargetConcurrency > 0 }

// Floor is a number of replicas run at a better tier than the spec's, so
// that preempting the rest (bronze) never leaves the service with none.
type Floor struct {
	Tier     Tier    // tier: silver or gold, above the spec's tier
	Replicas int     // replicas: 1..replicas.min, below replicas.max
	MaxPrice Credits // max_price: per GPU-hour for the floor's replicas; the spec's max_price when not given
}

// ReplicaPlacement narrows where one replica may run.
type ReplicaPlacement struct {
	Regions []string      // regions: continent codes, within placement.regions if that is set
	MaxRTT  time.Duration // max_rtt_ms: round trip from the renter's node, at most placement.max_rtt_ms if that is set
}

// MilliQPS is a request rate in thousandths of a request per second, so
// that a rate is read exactly as written (2.5 is 2500), as prices are.
type MilliQPS int64

// String writes the rate as a decimal: 2500 -> "2.5".
func (q MilliQPS) String() string {
	s := strconv.FormatInt(int64(q/1000), 10)
	if f := strings.TrimRight(strconv.FormatInt(int64(q%1000)+1000, 10)[1:], "0"); f != "" {
		s += "." + f
	}
	return s
}

// IsService reports a service spec (kind: service).
func (s *JobSpec) IsService() bool { return s.Service != nil }

// Kind is KindService for a service spec, else KindBatch.
func (s *JobSpec) Kind() string {
	if s.IsService() {
		return KindService
	}
	return KindBatch
}

// Service spec limits and defaults. The readiness defaults are
// Kubernetes's, which most inference servers are tuned for.
const (
	MaxServiceReplicas      = 32
	maxReadinessPath        = 256
	maxInitialDelay         = time.Hour // a large model can take long to load
	maxReadinessPeriod      = 5 * time.Minute
	maxReadinessTimeout     = time.Minute
	maxFailureThreshold     = 100
	maxTargetConcurrency    = 4096
	maxTargetQPS            = 100_000 * 1000
	minScaleWindow          = 10 * time.Second
	maxScaleUpAfter         = time.Hour
	maxScaleDownAfter       = 24 * time.Hour
	DefaultReadinessPeriod  = 10 * time.Second
	DefaultReadinessTimeout = time.Second
	DefaultFailureThreshold = 3
	DefaultScaleUpAfter     = time.Minute
	DefaultScaleDownAfter   = 5 * time.Minute
)

// svc is the spec's service section, made on its first field.
func svc(s *JobSpec) *Service {
	if s.Service == nil {
		s.Service = &Service{}
	}
	return s.Service
}

// serviceSchema is the service: section, in document order.
var serviceSchema = []specField{
	{name: "port", typ: "integer", required: true, help: "the TCP port the container listens on, 1..65535; the container has a network of its own, so no port is reserved",
		set: intVal(func(s *JobSpec) *int { return &svc(s).Port }, 1, 65535)},
	{name: "readiness", typ: "mapping", required: true, help: "an HTTP GET on the port; a replica takes traffic once it answers 2xx", sub: []specField{
		{name: "path", typ: "string", required: true, help: "absolute HTTP path such as /health, at most 256 bytes of visible ASCII (no spaces, no #)",
			set: strVal(func(s *JobSpec) *string { return &svc(s).Readiness.Path }, validReadinessPath)},
		{name: "initial_delay", typ: "duration", def: "0s", help: "before the first check, 0s..1h; checks before it would only fail while the model loads",
			set: boundedDur(func(s *JobSpec) *time.Duration { return &svc(s).Readiness.InitialDelay }, 0, maxInitialDelay)},
		{name: "period", typ: "duration", def: "10s", help: "between checks, 1s..5m",
			set: boundedDur(func(s *JobSpec) *time.Duration { return &svc(s).Readiness.Period }, time.Second, maxReadinessPeriod)},
		{name: "timeout", typ: "duration", def: "1s", help: "for one check's answer, 1s..1m and at most period",
			set: boundedDur(func(s *JobSpec) *time.Duration { return &svc(s).Readiness.Timeout }, time.Second, maxReadinessTimeout)},
		{name: "failure_threshold", typ: "integer", def: "3", help: "checks missed in a row that take a ready replica out of service, 1..100",
			set: intVal(func(s *JobSpec) *int { return &svc(s).Readiness.FailureThreshold }, 1, maxFailureThreshold)},
	}},
	{name: "replicas", typ: "mapping", help: "how many replicas run; resources are per replica", sub: []specField{
		{name: "min", typ: "integer", def: "1", help: "replicas always run, 1..32",
			set: intVal(func(s *JobSpec) *int { return &svc(s).Replicas.Min }, 1, MaxServiceReplicas)},
		{name: "max", typ: "integer", def: "min", help: "most replicas, min..32; above min only with autoscale",
			set: intVal(func(s *JobSpec) *int { return &svc(s).Replicas.Max }, 1, MaxServiceReplicas)},
	}},
	{name: "autoscale", typ: "mapping", help: "add and remove replicas between min and max to hold one target per ready replica; exactly one of the targets", sub: []specField{
		{name: "target_qps_per_replica", typ: "decimal", def: "none", help: "requests per second per ready replica, 0.001..100000, at most 3 decimals",
			set: setTargetQPS},
		{name: "target_concurrency", typ: "integer", def: "none", help: "requests in flight per ready replica, 1..4096",
			set: intVal(func(s *JobSpec) *int { return &svc(s).Autoscale.TargetConcurrency }, 1, maxTargetConcurrency)},
		{name: "scale_up_after", typ: "duration", def: "1m", help: "load above the target this long adds a replica, 10s..1h",
			set: boundedDur(func(s *JobSpec) *time.Duration { return &svc(s).Autoscale.ScaleUpAfter }, minScaleWindow, maxScaleUpAfter)},
		{name: "scale_down_after", typ: "duration", def: "5m", help: "load below the target this long removes one, 10s..1d",
			set: boundedDur(func(s *JobSpec) *time.Duration { return &svc(s).Autoscale.ScaleDownAfter }, minScaleWindow, maxScaleDownAfter)},
	}},
	{name: "floor", typ: "mapping", help: "replicas run at a better tier than the spec's, so that preempting the rest never leaves none (bronze replicas over a silver floor)", sub: []specField{
		{name: "tier", typ: "string", required: true, help: "silver or gold, above the spec's tier (a bronze floor could be preempted); gold requires start",
			set: setFloorTier},
		{name: "replicas", typ: "integer", def: "1", help: "replicas on the floor, 1..replicas.min and below replicas.max; they count towards min and max",
			set: intVal(func(s *JobSpec) *int { return &svc(s).Floor.Replicas }, 1, MaxServiceReplicas)},
		{name: "max_price", typ: "decimal", def: "max_price", help: "credits per GPU-hour for a floor replica, as max_price",
			set: setFloorPrice},
	}},
	{name: "replica_placement", typ: "list of mappings", def: "none", help: "entry i narrows where replica i runs (the floor's first): `{regions: [eu], max_rtt_ms: 40}`, within placement, which binds every replica; at most replicas.max entries",
		set: setReplicaPlacement},
	{name: "gateway", typ: "mapping", help: "where your node serves the service (never sent to providers)", sub: gatewaySchema},
}

// boundedDur decodes a duration in whole seconds within lo..hi; lo 0
// allows 0s.
func boundedDur(field func(*JobSpec) *time.Duration, lo, hi time.Duration) setFunc {
	return func(d *specDecoder, path string, n *yaml.Node) error {
		v, err := text(path, n)
		if err != nil {
			return err
		}
		t, perr := ParseDuration(v)
		if perr != nil || t%time.Second != 0 {
			return specErr(n, path, "want a duration in whole seconds such as 30s, 5m or 1h, got %q", v)
		}
		if t < lo || t > hi || t == 0 && lo > 0 {
			return specErr(n, path, "%s: use %s to %s", v, durString(lo), durString(hi))
		}
		*field(d.s) = t
		return nil
	}
}

func validReadinessPath(s string) (string, error) {
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || len(s) > maxReadinessPath {
		return "", fmt.Errorf("%q: want an absolute HTTP path such as /health, at most %d bytes", s, maxReadinessPath)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return "", fmt.Errorf("%q: byte %d is a space, a control character, # or not ASCII; percent-encode it", s, i)
		}
	}
	return s, nil
}

func setTargetQPS(d *specDecoder, path string, n *yaml.Node) error {
	v, err := text(path, n)
	if err != nil {
		return err
	}
	whole, frac, _ := strings.Cut(v, ".")
	micro, perr := parseMicro(v)
	if perr != nil || len(frac) > 3 || whole == "" || micro%1000 != 0 || micro/1000 < 1 || micro/1000 > maxTargetQPS {
		return specErr(n, path, "want a rate 0.001..100000 with at most 3 decimals, such as 2.5, got %q", v)
	}
	svc(d.s).Autoscale.TargetQPS = MilliQPS(micro / 1000)
	return nil
}

func setFloorTier(d *specDecoder, path string, n *yaml.Node) error {
	v, err := text(path, n)
	if err != nil {
		return err
	}
	switch t := Tier(v); t {
	case Silver, Gold:
		svc(d.s).Floor.Tier = t
		return nil
	case Bronze:
		return specErr(n, path, "a bronze replica can be preempted, so it is no floor: use silver or gold")
	}
	return specErr(n, path, "%q: want silver or gold", v)
}

func setFloorPrice(d *specDecoder, path string, n *yaml.Node) error {
	p, err := specPrice(path, n)
	if err != nil {
		return err
	}
	svc(d.s).Floor.MaxPrice = p
	return nil
}

func setReplicaPlacement(d *specDecoder, path string, n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return specErr(n, path, "want a list of {regions, max_rtt_ms}, one per replica")
	}
	if len(n.Content) > MaxServiceReplicas {
		return specErr(n, path, "%d entries, limit %d", len(n.Content), MaxServiceReplicas)
	}
	out := make([]ReplicaPlacement, 0, len(n.Content))
	for i, e := range n.Content {
		p := path + "[" + strconv.Itoa(i) + "]"
		if e.Kind != yaml.MappingNode {
			return specErr(e, p, "want a mapping such as {regions: [eu], max_rtt_ms: 40}")
		}
		var rp ReplicaPlacement
		seen := map[string]bool{}
		for j := 0; j+1 < len(e.Content); j += 2 {
			k, v := e.Content[j], e.Content[j+1]
			key, err := text(p, k)
			if err != nil {
				return err
			}
			fp := p + "." + key
			if seen[key] {
				return specErr(k, fp, "repeated")
			}
			seen[key] = true
			switch key {
			case "regions":
				// The decoder's list reader, pointed at this entry.
				var regions []string
				set := listVal(func(*JobSpec) *[]string { return &regions }, len(Continents), true, validRegion)
				if err := set(d, fp, v); err != nil {
					return err
				}
				if len(regions) == 0 {
					return specErr(v, fp, "empty; leave regions out to allow any")
				}
				rp.Regions = regions
			case "max_rtt_ms":
				ms, err := integer(fp, v, 1, maxRTTMillis)
				if err != nil {
					return err
				}
				rp.MaxRTT = time.Duration(ms) * time.Millisecond
			default:
				return specErr(k, fp, "unknown field (known: regions, max_rtt_ms)")
			}
		}
		if len(rp.Regions) == 0 && rp.MaxRTT == 0 {
			return specErr(e, p, "give regions, max_rtt_ms or both")
		}
		out = append(out, rp)
	}
	svc(d.s).ReplicaPlacement = out
	return nil
}

// line is the line of the first of paths present: its name's, so that a
// block-style section is named where it starts.
func (d *specDecoder) line(paths ...string) int {
	for _, p := range paths {
		if l := d.keys[p]; l > 0 {
			return l
		}
	}
	return 0
}

func (d *specDecoder) errAt(field string, lineOf []string, format string, args ...any) *SpecError {
	return &SpecError{Line: d.line(lineOf...), Field: field, Msg: fmt.Sprintf(format, args...)}
}

// tierRank orders tiers by what a lease is promised: gold over silver over
// bronze.
func tierRank(t Tier) int {
	switch t {
	case Gold:
		return 3
	case Silver:
		return 2
	case Bronze:
		return 1
	}
	return 0
}

// checkService is the cross-field part of a service spec: kind and
// section together, defaults, the replica counts, the floor against the
// spec's tier, and the batch fields a service cannot use. It runs before
// the other cross checks, since it sets the workload.
func (d *specDecoder) checkService() error {
	s := d.s
	switch {
	case d.kind == KindService && s.Service == nil:
		return d.errAt("service", []string{"service", "kind"}, "kind: service requires a service section: at least port and readiness.path")
	case d.kind != KindService && s.Service != nil:
		return d.errAt("kind", []string{"kind", "service"}, "a service section needs kind: service")
	case s.Service == nil:
		return nil
	}
	if s.Workload == "" {
		s.Workload = "service"
	} else if s.Workload != "service" {
		return d.errAt("workload", []string{"workload"}, "kind: service is a service workload; remove workload or write workload: service")
	}
	sv := s.Service
	r := &sv.Readiness
	if r.Period == 0 {
		r.Period = DefaultReadinessPeriod
	}
	if r.Timeout == 0 {
		r.Timeout = DefaultReadinessTimeout
	}
	if r.FailureThreshold == 0 {
		r.FailureThreshold = DefaultFailureThreshold
	}
	if r.Timeout > r.Period {
		return d.errAt("service.readiness.timeout", []string{"service.readiness.timeout", "service.readiness.period"},
			"%s is longer than service.readiness.period %s", durString(r.Timeout), durString(r.Period))
	}
	rp := &sv.Replicas
	if rp.Min == 0 {
		rp.Min = 1
	}
	if rp.Max == 0 {
		rp.Max = rp.Min
	}
	if rp.Max < rp.Min {
		return d.errAt("service.replicas.max", []string{"service.replicas.max"}, "%d is below replicas.min %d", rp.Max, rp.Min)
	}
	a := &sv.Autoscale
	switch {
	case a.TargetQPS > 0 && a.TargetConcurrency > 0:
		return d.errAt("service.autoscale", []string{"service.autoscale.target_concurrency", "service.autoscale"},
			"use either target_qps_per_replica or target_concurrency, not both")
	case !a.Enabled() && (a.ScaleUpAfter > 0 || a.ScaleDownAfter > 0):
		return d.errAt("service.autoscale", []string{"service.autoscale"}, "give target_qps_per_replica or target_concurrency, the load to scale on")
	case a.Enabled() && rp.Max == rp.Min:
		return d.errAt("service.replicas.max", []string{"service.replicas.max", "service.replicas", "service.autoscale"},
			"autoscale needs room: replicas.max must be above replicas.min (%d)", rp.Min)
	case !a.Enabled() && rp.Max > rp.Min:
		return d.errAt("service.replicas.max", []string{"service.replicas.max"},
			"above replicas.min only with autoscale: without it %d replicas run, never more", rp.Min)
	}
	if a.Enabled() {
		if a.ScaleUpAfter == 0 {
			a.ScaleUpAfter = DefaultScaleUpAfter
		}
		if a.ScaleDownAfter == 0 {
			a.ScaleDownAfter = DefaultScaleDownAfter
		}
	}
	if err := d.checkFloor(); err != nil {
		return err
	}
	if len(sv.ReplicaPlacement) > rp.Max {
		return d.errAt("service.replica_placement", []string{"service.replica_placement"},
			"%d entries for at most %d replicas", len(sv.ReplicaPlacement), rp.Max)
	}
	for i, p := range sv.ReplicaPlacement {
		f := fmt.Sprintf("service.replica_placement[%d]", i)
		for _, reg := range p.Regions {
			if len(s.Placement.Regions) > 0 && !containsFold(s.Placement.Regions, reg) {
				return d.errAt(f+".regions", []string{"service.replica_placement"},
					"%s is outside placement.regions %v, which binds every replica", reg, s.Placement.Regions)
			}
		}
		if s.Placement.MaxRTT > 0 && p.MaxRTT > s.Placement.MaxRTT {
			return d.errAt(f+".max_rtt_ms", []string{"service.replica_placement"},
				"%d is looser than placement.max_rtt_ms %d, which binds every replica", p.MaxRTT/time.Millisecond, s.Placement.MaxRTT/time.Millisecond)
		}
	}
	return d.serviceRefusals()
}

func (d *specDecoder) checkFloor() error {
	s, f := d.s, &d.s.Service.Floor
	if f.Tier == "" {
		return nil
	}
	if tierRank(f.Tier) <= tierRank(s.Tier) {
		return d.errAt("service.floor.tier", []string{"service.floor.tier"},
			"%s is not above tier %s, so every replica already has it: remove floor, or lower tier", f.Tier, s.Tier)
	}
	if f.Replicas == 0 {
		f.Replicas = 1
	}
	if f.MaxPrice == 0 {
		f.MaxPrice = s.MaxPrice
	}
	rp := s.Service.Replicas
	if f.Replicas > rp.Min {
		return d.errAt("service.floor.replicas", []string{"service.floor.replicas"},
			"%d is more than replicas.min %d: the floor always runs", f.Replicas, rp.Min)
	}
	if f.Replicas >= rp.Max {
		return d.errAt("service.floor.replicas", []string{"service.floor.replicas", "service.floor"},
			"every replica would be on the floor: write tier: %s and remove floor", f.Tier)
	}
	return nil
}

// serviceRefusals refuses the batch fields that mean nothing for a
// service, rather than ignoring them: results returned when the job ends
// (a service is stopped, not finished), one checkpoint for several
// replicas, an expected end, and checks of a standard output.
func (d *specDecoder) serviceRefusals() error {
	s := d.s
	switch {
	case s.Duration.Expected != 0 && s.Duration.Expected != s.Duration.Max:
		return d.errAt("duration.expected", []string{"duration.expected"},
			"a service runs its whole lease: leave duration.expected out (duration.max is each replica's lease)")
	case s.Outputs.Path != "" || s.Outputs.MaxBytes != 0:
		return d.errAt("outputs", []string{"outputs"}, "a service is stopped, not finished, so it has no results to return; remove outputs")
	case s.Checkpoint.Path != "":
		return d.errAt("checkpoint", []string{"checkpoint"}, "replicas share no state; keep a service's state outside it and remove checkpoint")
	case s.Verify.Replicas > 0 || s.Verify.ExpectSHA256 != "":
		return d.errAt("verify", []string{"verify"}, "verify checks a batch job's stdout; a service has none to check")
	}
	return nil
}

func setKind(d *specDecoder, path string, n *yaml.Node) error {
	v, err := text(path, n)
	if err != nil {
		return err
	}
	if !contains(Kinds, v) {
		return specErr(n, path, "%q: want batch or service", v)
	}
	d.kind = v
	return nil
}

// encodeService writes the service section with every default spelled
// out, so that a spec's hash does not depend on which defaults the renter
// wrote.
func encodeService(root *yaml.Node, sv *Service) {
	if sv == nil {
		return
	}
	m := yMap()
	yAdd(m, "port", yInt(sv.Port))
	r := sv.Readiness
	rd := yMap()
	rd.Style = yaml.FlowStyle
	yAdd(rd, "path", yStr(r.Path))
	yAdd(rd, "initial_delay", yStr(durString(r.InitialDelay)))
	yAdd(rd, "period", yStr(durString(r.Period)))
	yAdd(rd, "timeout", yStr(durString(r.Timeout)))
	yAdd(rd, "failure_threshold", yInt(r.FailureThreshold))
	yAdd(m, "readiness", rd)
	rp := yMap()
	rp.Style = yaml.FlowStyle
	yAdd(rp, "min", yInt(sv.Replicas.Min))
	yAdd(rp, "max", yInt(sv.Replicas.Max))
	yAdd(m, "replicas", rp)
	if a := sv.Autoscale; a.Enabled() {
		am := yMap()
		am.Style = yaml.FlowStyle
		if a.TargetQPS > 0 {
			yAdd(am, "target_qps_per_replica", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: a.TargetQPS.String()})
		}
		yOptInt(am, "target_concurrency", a.TargetConcurrency)
		yAdd(am, "scale_up_after", yStr(durString(a.ScaleUpAfter)))
		yAdd(am, "scale_down_after", yStr(durString(a.ScaleDownAfter)))
		yAdd(m, "autoscale", am)
	}
	if f := sv.Floor; f.Tier != "" {
		fm := yMap()
		fm.Style = yaml.FlowStyle
		yAdd(fm, "tier", yStr(string(f.Tier)))
		yAdd(fm, "replicas", yInt(f.Replicas))
		yAdd(fm, "max_price", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: FormatCredits(f.MaxPrice)})
		yAdd(m, "floor", fm)
	}
	if len(sv.ReplicaPlacement) > 0 {
		list := &yaml.Node{Kind: yaml.SequenceNode}
		for _, p := range sv.ReplicaPlacement {
			pm := yMap()
			pm.Style = yaml.FlowStyle
			if len(p.Regions) > 0 {
				yAdd(pm, "regions", yStrList(p.Regions, yaml.FlowStyle))
			}
			yOptInt(pm, "max_rtt_ms", int(p.MaxRTT/time.Millisecond))
			list.Content = append(list.Content, pm)
		}
		yAdd(m, "replica_placement", list)
	}
	encodeGateway(m, sv.Gateway)
	yAdd(root, "service", m)
}
