package providing

import (
	"testing"

	"github.com/gleaner-net/gleaner/auction"
)

// A gang member's container is told its rank and the gang's size, from
// the spec whose hash the provider signed.
func TestProvidedEnvGivesGangRank(t *testing.T) {
	s, err := auction.ParseJobSpec([]byte("name: t\nimage: x:1\nresources: {gpus: 1}\ntier: bronze\nmax_price: 1\nduration: {max: 1h}\ngang_of: {id: t-1, rank: 2, size: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := providedEnv(s)
	if env[auction.EnvGangRank] != "2" || env[auction.EnvGangSize] != "3" || len(env) != 2 {
		t.Fatalf("env %v", env)
	}
	s.GangOf = nil
	if env := providedEnv(s); env != nil {
		t.Fatalf("a plain job is given %v", env)
	}
}
