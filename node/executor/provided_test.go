package executor

import (
	"errors"
	"slices"
	"testing"
)

// A shard's index reaches the job through Provided, the one way a
// GLEANER_ variable other than the executor's own gets in.
func TestProvidedEnv(t *testing.T) {
	s := testSpec(t)
	s.Provided = map[string]string{"GLEANER_SHARD_INDEX": "7", "GLEANER_SHARD_COUNT": "8"}
	if err := s.validate(); err != nil {
		t.Fatal(err)
	}
	env := s.environ("", nil, "")
	if !slices.Contains(env, "GLEANER_SHARD_INDEX=7") || !slices.Contains(env, "GLEANER_SHARD_COUNT=8") {
		t.Fatalf("env %v", env)
	}
	for _, k := range []string{"SHARD_INDEX", EnvJobID, "GLEANER_X=1"} {
		s.Provided = map[string]string{k: "1"}
		if err := s.validate(); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%q accepted: %v", k, err)
		}
	}
}
