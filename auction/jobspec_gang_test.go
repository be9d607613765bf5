package auction

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const gangBase = `name: train
image: trainer:1
resources: {gpus: 4}
tier: bronze
max_price: 2
duration: {max: 1h}
`

func TestGangSpecRoundTripsAndMembersCarryRank(t *testing.T) {
	s, err := ParseJobSpec([]byte(gangBase + "gang: {members: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Gang == nil || s.Gang.Members != 3 {
		t.Fatalf("gang %+v", s.Gang)
	}
	b, _ := yaml.Marshal(s)
	if back, err := ParseJobSpec(b); err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip: %v\n%s", err, b)
	}
	hashes := map[string]bool{}
	for rank := range 3 {
		m, err := s.MemberSpec("train-abc", rank)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := yaml.Marshal(m)
		back, err := ParseJobSpec(b)
		if err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		if back.Gang != nil || *back.GangOf != (GangOf{ID: "train-abc", Rank: rank, Size: 3}) {
			t.Fatalf("member %d: gang %+v gang_of %+v", rank, back.Gang, back.GangOf)
		}
		env := back.GangEnv()
		if env[EnvGangRank] != strconv.Itoa(rank) || env[EnvGangSize] != "3" {
			t.Fatalf("member %d env %v", rank, env)
		}
		// The rank is inside the hash the provider signs: a renter cannot
		// start member 0's lease as member 1.
		h, _ := SpecHash(back)
		hashes[string(h)] = true
	}
	if len(hashes) != 3 {
		t.Fatalf("members' spec hashes not distinct: %d", len(hashes))
	}
	if s.GangEnv() != nil {
		t.Fatal("the gang's own spec is no member")
	}
	if _, err := s.MemberSpec("train-abc", 3); err == nil {
		t.Fatal("member 3 of 3 accepted")
	}
	plain, _ := ParseJobSpec([]byte(gangBase))
	if b, _ := yaml.Marshal(plain); strings.Contains(string(b), "gang") {
		t.Fatalf("a plain spec writes gang fields, changing every lease's hash:\n%s", b)
	}
}

func TestGangSpecErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ extra, field, msg string }{
		{"gang: {members: 1}", "gang.members", "at least 2"},
		{"gang: {members: 9}", "gang.members", "at most 8"},
		{"gang: {members: two}", "gang.members", "whole number"},
		{"gang: {}", "gang.members", ""},
		{"gang: {members: 2}\narray: {shards: 2}", "gang", "array"},
		{"gang: {members: 2}\nverify: {replicas: 2}", "gang", "verify replicas"},
		{"gang: {members: 2}\nverify: {expect_sha256: " + strings.Repeat("ab", 32) + "}", "gang", "canary"},
		{"gang: {members: 2}\ngang_of: {id: g, rank: 0, size: 2}", "gang_of", "never with gang"},
		{"gang_of: {id: g, rank: 2, size: 2}", "gang_of.rank", "not below"},
		{"gang_of: {id: 'a b', rank: 0, size: 2}", "gang_of.id", "want 1.."},
		{"gang_of: {id: g, rank: 0, size: 9}", "gang_of.size", ""},
	} {
		_, err := ParseJobSpec([]byte(gangBase + c.extra + "\n"))
		var se *SpecError
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%q: got %v, want an error on %s saying %q", c.extra, err, c.field, c.msg)
		}
	}
	svc := "name: s\nkind: service\nimage: x\nservice: {port: 8000, readiness: {path: /health}}\nresources: {gpus: 1}\ntier: silver\nmax_price: 1\nduration: {max: 6h}\ngang: {members: 2}\n"
	var se *SpecError
	if _, err := ParseJobSpec([]byte(svc)); !errors.As(err, &se) || se.Field != "gang" || !strings.Contains(se.Msg, "batch") {
		t.Errorf("a service gang: %v", err)
	}
}

func TestGangExampleParses(t *testing.T) {
	b, err := os.ReadFile("../docs/examples/gang.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseJobSpec(b)
	if err != nil || s.Gang == nil || s.Gang.Members != 4 {
		t.Fatalf("docs/examples/gang.yaml: %v (%+v)", err, s)
	}
}
