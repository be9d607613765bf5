package auction

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// GangSpec is a gang: one batch job run as Members jobs on Members
// distinct providers, each with the spec's resources, placed and started
// together and ended together (auction/renter/gang.go). A distributed
// training run is the case: one member lost leaves the others waiting
// on a collective that never completes, so the renter preempts them all
// and places the gang again from its checkpoint.
type GangSpec struct {
	Members int // members: 2..MaxGangMembers
}

// GangOf marks one member's spec: the renter's node writes it into the
// spec it sends for member Rank of gang ID, so that it is inside the
// spec hash the provider signs, and the provider gives the container
// GLEANER_GANG_RANK and GLEANER_GANG_SIZE from it (GangEnv).
type GangOf struct {
	ID   string // id: the gang's ID at the renter
	Rank int    // rank: 0-based
	Size int    // size: the gang's members
}

// MaxGangMembers bounds a gang. Its members are awarded one after
// another and none is started until the last award is made, while each
// provider holds an award unstarted for only its start deadline
// (auction/provider.DefaultStartDeadline, 30 s). A member's round takes
// up to a quote deadline and an award deadline (3 s and 10 s, usually
// well under a second each), so 8 members fit the deadline even with a
// slow round or two; a larger gang would see its first awards lapse
// before its last was made. It also bounds the odds of losing a member:
// the whole gang stops for any one.
const MaxGangMembers = 8

// maxGangID bounds gang_of.id: a job name (64) and the renter's suffix.
const maxGangID = 128

// Env names the provider's executor sets for a gang member.
const (
	EnvGangRank = ReservedEnvPrefix + "GANG_RANK"
	EnvGangSize = ReservedEnvPrefix + "GANG_SIZE"
	// EnvGangPeers is the members' addresses, set by the gang's network
	// forwarding (node/gangnet), not by this package.
	EnvGangPeers = ReservedEnvPrefix + "GANG_PEERS"
)

// GangEnv is the environment a gang member's container gets, nil for a
// job that is no member.
func (s *JobSpec) GangEnv() map[string]string {
	if s.GangOf == nil {
		return nil
	}
	return map[string]string{EnvGangRank: strconv.Itoa(s.GangOf.Rank), EnvGangSize: strconv.Itoa(s.GangOf.Size)}
}

// MemberSpec is member rank's spec of gang id: the gang's, with gang
// replaced by gang_of.
func (s *JobSpec) MemberSpec(id string, rank int) (*JobSpec, error) {
	if s.Gang == nil || rank < 0 || rank >= s.Gang.Members {
		return nil, fmt.Errorf("no member %d", rank)
	}
	if _, err := validGangID(id); err != nil {
		return nil, err
	}
	c := *s
	c.GangOf = &GangOf{ID: id, Rank: rank, Size: s.Gang.Members}
	c.Gang = nil
	return &c, nil
}

func gangOf(s *JobSpec) *GangOf {
	if s.GangOf == nil {
		s.GangOf = &GangOf{}
	}
	return s.GangOf
}

var gangSchema = []specField{
	{name: "members", typ: "integer", required: true, help: "how many providers, 2..8, each running the job on resources.gpus GPUs with GLEANER_GANG_RANK (0-based) and GLEANER_GANG_SIZE in its environment; all start together, and one lost stops them all and the gang is placed again",
		set: setGangMembers},
}

var gangOfSchema = []specField{
	{name: "id", typ: "string", required: true, help: "the gang's ID at its renter",
		set: strVal(func(s *JobSpec) *string { return &gangOf(s).ID }, validGangID)},
	{name: "rank", typ: "integer", required: true, help: "0-based, below size",
		set: intVal(func(s *JobSpec) *int { return &gangOf(s).Rank }, 0, MaxGangMembers-1)},
	{name: "size", typ: "integer", required: true, help: "the gang's members, 2..8",
		set: intVal(func(s *JobSpec) *int { return &gangOf(s).Size }, 2, MaxGangMembers)},
}

func setGangMembers(d *specDecoder, path string, n *yaml.Node) error {
	i, err := integer(path, n, -1<<31, 1<<31)
	switch {
	case err != nil:
		return specErr(n, path, "must be a whole number 2..%d, got %q", MaxGangMembers, n.Value)
	case i < 2:
		return specErr(n, path, "must be at least 2 (one member is a plain job: remove gang)")
	case i > MaxGangMembers:
		return specErr(n, path, "must be at most %d, got %d: a gang's awards must all be made before the first lapses unstarted", MaxGangMembers, i)
	}
	if d.s.Gang == nil {
		d.s.Gang = &GangSpec{}
	}
	d.s.Gang.Members = i
	return nil
}

func validGangID(s string) (string, error) {
	ok := s != "" && len(s) <= maxGangID
	for _, r := range s {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r))
	}
	if !ok {
		return "", fmt.Errorf("%q: want 1..%d of A-Z a-z 0-9 . _ -", s, maxGangID)
	}
	return s, nil
}

// checkGang is gang's and gang_of's cross-field checks, after array's.
func (d *specDecoder) checkGang() error {
	s := d.s
	if s.Gang != nil && s.GangOf != nil {
		return d.errAt("gang_of", []string{"gang_of"}, "a member is one job of a gang: the renter's node writes gang_of, never with gang")
	}
	if m := s.GangOf; m != nil && m.Rank >= m.Size {
		return d.errAt("gang_of.rank", []string{"gang_of.rank"}, "%d is not below gang_of.size %d", m.Rank, m.Size)
	}
	if s.Gang == nil && s.GangOf == nil {
		return nil
	}
	field := "gang"
	if s.Gang == nil {
		field = "gang_of"
	}
	switch {
	case s.Service != nil:
		return d.errAt(field, []string{field, "kind"}, "only a batch job runs as a gang; a service scales by service.replicas")
	case s.Array != nil || s.Shard != nil:
		return d.errAt(field, []string{field, "array", "shard"}, "a gang cannot also be an array; run the array's shards as plain jobs or the gang alone")
	case s.Verify.Replicas > 1:
		return d.errAt(field, []string{field, "verify.replicas"}, "a gang's members cannot also be verify replicas; remove one of them")
	case s.Verify.ExpectSHA256 != "":
		return d.errAt(field, []string{field, "verify.expect_sha256"}, "a gang cannot be a canary (verify.expect_sha256): each member's output differs")
	}
	return nil
}

// encodeGang writes gang and gang_of with every field spelled out.
func encodeGang(root *yaml.Node, s *JobSpec) {
	if g := s.Gang; g != nil {
		m := yMap()
		m.Style = yaml.FlowStyle
		yAdd(m, "members", yInt(g.Members))
		yAdd(root, "gang", m)
	}
	if g := s.GangOf; g != nil {
		m := yMap()
		m.Style = yaml.FlowStyle
		yAdd(m, "id", yStr(g.ID))
		yAdd(m, "rank", yInt(g.Rank))
		yAdd(m, "size", yInt(g.Size))
		yAdd(root, "gang_of", m)
	}
}
