// Package modelimage builds the test model server's Docker image FROM
// scratch, so that tests and the demo need no registry. Like demoimage it
// imports nothing of gleaner but staticimage, so that any package's tests can build it.
package modelimage

import (
	"context"
	"fmt"

	"github.com/gleaner-net/gleaner/testnet/staticimage"
)

// Tag is the test model server's image.
const Tag = "gleaner-modelserver:dev"

// Port is the port the server listens on in the image unless
// MODELSERVER_PORT says otherwise.
const Port = 8000

// Build builds testnet/modelserver as a static binary and packages it
// FROM scratch as Tag. moduleRoot is the repository root.
func Build(ctx context.Context, moduleRoot string) error {
	// Not root: the server needs no privilege, port 8000 included.
	return staticimage.Build(ctx, moduleRoot, staticimage.Image{Package: "./testnet/modelserver", Tag: Tag, Extra: fmt.Sprintf("USER 65534:65534\nEXPOSE %d\n", Port)})
}
