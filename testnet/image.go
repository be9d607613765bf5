package testnet

import (
	"context"

	"github.com/gleaner-net/gleaner/testnet/demoimage"
)

// DemoImage is the tag of the demo workload's image.
const DemoImage = demoimage.Tag

// BuildDemoImage builds testnet/demojob as a static binary and packages it
// FROM scratch, so that tests and the demo need no registry. moduleRoot is
// the repository root.
func BuildDemoImage(ctx context.Context, moduleRoot string) error {
	return demoimage.Build(ctx, moduleRoot)
}
