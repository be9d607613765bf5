package testnet

import (
	"context"

	"github.com/gleaner-net/gleaner/testnet/demoimage"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

// DemoImage is the tag of the demo workload's image.
const DemoImage = demoimage.Tag

// BuildDemoImage builds testnet/demojob as a static binary and packages it
// FROM scratch, so that tests and the demo need no registry. moduleRoot is
// the repository root.
func BuildDemoImage(ctx context.Context, moduleRoot string) error {
	return demoimage.Build(ctx, moduleRoot)
}

// ModelImage is the tag of the test model server's image.
const ModelImage = modelimage.Tag

// BuildModelImage builds testnet/modelserver, an OpenAI-style stand-in for
// an inference server, as a static binary and packages it FROM scratch.
// moduleRoot is the repository root.
func BuildModelImage(ctx context.Context, moduleRoot string) error {
	return modelimage.Build(ctx, moduleRoot)
}
