package node

import (
	"context"
	"net/http"

	"github.com/gleaner-net/gleaner/node/console"
)

// withConsole serves the web console under /ui/ beside the API (api),
// on the same listener and so the same origin. The console calls the
// RPC server's handler in-process, with the repo's token, so its pages
// show what the RPC returns; its login takes the same token.
func (n *Node) withConsole(api http.Handler, token string) http.Handler {
	ui := console.New(console.Options{
		Token:       token,
		Caller:      console.InProcess(n.rpc.Handler(), token),
		AllowRemote: n.cfg.RPC.AllowRemote,
		Log:         n.log,
	})
	// The console samples GPU history on a ticker; it stops with the node.
	n.onStop(func(context.Context) error { ui.Close(); return nil })
	return console.Mount(api, ui)
}
