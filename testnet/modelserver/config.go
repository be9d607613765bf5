package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// config is the server's behaviour. The zero delays answer at once.
type config struct {
	Port       int
	Model      string
	TTFT       time.Duration // before the first token
	TokenDelay time.Duration // between tokens
	// Tokens is where the model stops of itself (finish_reason "stop");
	// 0 means it never does, so a completion has max_tokens tokens.
	Tokens    int
	MaxTokens int           // the largest max_tokens a request may ask
	LoadDelay time.Duration // /health answers 503 until it has passed

	// Test knobs, for the gateway's fault and bound tests.
	NeverReady bool // /health never answers 200
	Endless    bool // completions never end: an unbounded response
}

// defaultMaxTokens is what a request without max_tokens gets: OpenAI's
// legacy completions default.
const defaultMaxTokens = 16

// maxDelay bounds every delay knob, so that a mistyped value (-ttft 10000h)
// is an error rather than a server that looks hung.
const maxDelay = time.Hour

// parseConfig reads flags from args and, for a flag not on the command
// line, its MODELSERVER_ variable from getenv.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("modelserver", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.IntVar(&c.Port, "port", 8000, "TCP port to listen on")
	fs.StringVar(&c.Model, "model", "gleaner-test-model", "the one model served")
	fs.DurationVar(&c.TTFT, "ttft", 0, "time to first token")
	fs.DurationVar(&c.TokenDelay, "token-delay", 0, "delay between tokens")
	fs.IntVar(&c.Tokens, "tokens", 0, "tokens after which a completion stops by itself (0: as many as max_tokens)")
	fs.IntVar(&c.MaxTokens, "max-tokens", 4096, "largest max_tokens accepted")
	fs.DurationVar(&c.LoadDelay, "load-delay", 0, "time to \"load the model\": /health and /v1 answer 503 until then")
	fs.BoolVar(&c.NeverReady, "test-never-ready", false, "TEST KNOB: never become ready")
	fs.BoolVar(&c.Endless, "test-endless", false, "TEST KNOB: completions never end (streamed or not)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		if v := getenv(name); v != "" && !onCommandLine[f.Name] && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %v", name, v, err)
			}
		}
	})
	if envErr != nil {
		return config{}, envErr
	}
	return c, c.validate()
}

// envName is the environment variable that sets flag name.
func envName(flagName string) string {
	return "MODELSERVER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (c config) validate() error {
	switch {
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("port %d out of range", c.Port)
	case c.Model == "" || len(c.Model) > 256:
		return fmt.Errorf("model name must be 1 to 256 bytes")
	case c.MaxTokens < 1 || c.MaxTokens > 1<<20:
		return fmt.Errorf("max-tokens %d: must be 1 to %d", c.MaxTokens, 1<<20)
	case c.Tokens < 0 || c.Tokens > c.MaxTokens:
		return fmt.Errorf("tokens %d: must be 0 to max-tokens (%d)", c.Tokens, c.MaxTokens)
	}
	for name, d := range map[string]time.Duration{"ttft": c.TTFT, "token-delay": c.TokenDelay, "load-delay": c.LoadDelay} {
		if d < 0 || d > maxDelay {
			return fmt.Errorf("%s %v: must be 0 to %v", name, d, maxDelay)
		}
	}
	return nil
}
