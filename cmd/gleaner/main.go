// Command gleaner runs a gleaner node and talks to it. Every command except
// init, daemon, version and testnet is a client of the node's JSON-RPC API.
package main

import "os"

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }
