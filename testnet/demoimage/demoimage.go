// Package demoimage builds the demo workload's Docker image FROM scratch,
// so that tests and the demo need no registry. It imports nothing of
// gleaner but staticimage, so that node's own tests can build the image
// without the testnet package (which imports node).
package demoimage

import (
	"context"

	"github.com/gleaner-net/gleaner/testnet/staticimage"
)

// Tag is the demo workload's image.
const Tag = "gleaner-demojob:1"

// Build builds testnet/demojob as a static binary and packages it FROM
// scratch as Tag. moduleRoot is the repository root.
func Build(ctx context.Context, moduleRoot string) error {
	return staticimage.Build(ctx, moduleRoot, staticimage.Image{Package: "./testnet/demojob", Tag: Tag, Extra: ""})
}
