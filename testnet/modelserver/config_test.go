package main

import (
	"io"
	"testing"
	"time"
)

// TestConfigEnvAndFlags: a variable sets a flag's value, a flag on the
// command line wins over it, and a bad value in either is an error.
func TestConfigEnvAndFlags(t *testing.T) {
	env := map[string]string{
		"MODELSERVER_PORT": "9001", "MODELSERVER_TOKEN_DELAY": "20ms", "MODELSERVER_MODEL": "from-env",
		"MODELSERVER_TEST_ENDLESS": "true",
	}
	c, err := parseConfig([]string{"-model", "from-flag"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 9001 || c.TokenDelay != 20*time.Millisecond || c.Model != "from-flag" || !c.Endless || c.NeverReady {
		t.Fatalf("%+v", c)
	}
	d := defaults(t)
	if d.Port != 8000 || d.Model != "gleaner-test-model" || d.MaxTokens != 4096 || d.Tokens != 0 || d.TTFT != 0 {
		t.Fatalf("defaults: %+v", d)
	}
	for _, bad := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"-port", "0"}, nil},
		{[]string{"-ttft", "-1s"}, nil},
		{[]string{"-token-delay", "2h"}, nil},
		{[]string{"-tokens", "5000"}, nil},
		{[]string{"-max-tokens", "0"}, nil},
		{[]string{"-model", ""}, nil},
		{[]string{"extra"}, nil},
		{nil, map[string]string{"MODELSERVER_TOKEN_DELAY": "soon"}},
		{nil, map[string]string{"MODELSERVER_TEST_NEVER_READY": "maybe"}},
	} {
		if c, err := parseConfig(bad.args, func(k string) string { return bad.env[k] }, io.Discard); err == nil {
			t.Errorf("%v %v accepted: %+v", bad.args, bad.env, c)
		}
	}
}
