// Command modelserver is a stand-in for an inference server (vLLM, TGI,
// llama.cpp's server) in tests and the demo: a static binary, packaged FROM
// scratch by testnet/modelimage, that answers OpenAI-style /v1/models and
// /v1/completions with deterministic text ("tok0 tok1 ...") at a
// configurable pace, so that the mesh's service gateway can be tested and
// measured without a GPU or a model's weights.
//
//	modelserver [-port 8000] [-model gleaner-test-model] [-ttft 0s] [-token-delay 0s]
//	            [-tokens 0] [-max-tokens 4096] [-load-delay 0s]
//	            [-test-never-ready] [-test-endless]
//
// Every flag can also be set by the environment, as MODELSERVER_ and the
// flag's name in capitals with - as _ (MODELSERVER_TOKEN_DELAY=50ms), so
// that a job spec can configure the image without a command line; a flag
// given on the command line wins over its variable.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modelserver:", err)
		os.Exit(2)
	}
	// SIGTERM is what `docker stop` and a provider's executor send: finish
	// what is in flight, then exit 0.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(cfg.Port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "modelserver:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "modelserver: serving %q on %s\n", cfg.Model, ln.Addr())
	if err := run(ctx, cfg, ln); err != nil {
		fmt.Fprintln(os.Stderr, "modelserver:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "modelserver: stopped")
}
