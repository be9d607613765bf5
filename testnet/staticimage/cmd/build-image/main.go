// Command build-image builds the repository's images FROM scratch, as
// the tests do (staticimage.Build: the Engine API with BuildKit, no
// registry, no docker CLI and so none of its legacy-builder warning).
// The Makefile's image targets run it from the repository root:
//
//	go run ./testnet/staticimage/cmd/build-image demo model
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/gleaner-net/gleaner/testnet/demoimage"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	images := map[string]struct {
		tag   string
		build func(context.Context, string) error
	}{
		"demo":  {demoimage.Tag, demoimage.Build},
		"model": {modelimage.Tag, modelimage.Build},
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: build-image demo|model... (run from the repository root)")
		os.Exit(2)
	}
	for _, name := range os.Args[1:] {
		img, ok := images[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "build-image: no image %q (demo, model)\n", name)
			os.Exit(2)
		}
		if err := img.build(ctx, "."); err != nil {
			fmt.Fprintf(os.Stderr, "build-image: %v\n", err)
			os.Exit(1)
		}
		fmt.Println("built", img.tag)
	}
}
