package main

import (
	"context"
	"io"
	"os/signal"
	"syscall"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/urfave/cli/v2"
)

const appHelp = `gleaner is a peer-to-peer market for idle GPU time. Each machine runs one
node (gleaner daemon); every other command talks to that node through its
local JSON-RPC API.

Getting started:
   gleaner init                     create a node (identity, token, config) in ~/.gleaner
   gleaner daemon                   run it until Ctrl-C
   gleaner id                       who am I, where do I listen
   gleaner peers                    who am I connected to
   gleaner offer set --region eu/DE --price.bronze 0.45    sell this machine's GPUs
   gleaner market offers 'gpu=H100 price.bronze<=1.5'      what is for sale
   gleaner testnet up --nodes 5     a whole local network on this machine

Every command accepts --json for scripts. Exit codes: 0 success, 1 failure,
2 usage error, 130 interrupted (Ctrl-C while a job goes on). Set GLEANER_REPO or --repo to use another repo directory.`

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:                 "gleaner",
		Usage:                "rent out idle GPUs, or rent them, with no middleman",
		Description:          appHelp,
		Version:              node.Version,
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    "repo",
				Usage:   "node repo directory",
				EnvVars: []string{"GLEANER_REPO"},
				Value:   repo.DefaultRepoDir(),
			},
		},
		Commands: []*cli.Command{
			initCommand(),
			daemonCommand(),
			idCommand(),
			peersCommand(),
			connectCommand(),
			disconnectCommand(),
			pingCommand(),
			offerCommand(),
			marketCommand(),
			jobCommand(),
			serviceCommand(),
			ledgerCommand(),
			earningsCommand(),
			spendCommand(),
			repCommand(),
			dataCommand(),
			rpcCommand(),
			versionCommand(),
			doctorCommand(),
			consoleCommand(),
			testnetCommand(),
			simCommand(),
			completionCommand(),
		},
		// Errors are reported by run, once, in one format.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	prepareCommands(app)
	return app
}

// notFound carries CommandNotFound's verdict to run: urfave/cli's hook
// cannot return an error.
var notFound error

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The first Ctrl-C cancels ctx and lets the command say where things
	// stand; stop() then restores the default, so a second one kills.
	context.AfterFunc(ctx, stop)
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, interspersed(app, args))
	if err == nil && notFound != nil {
		err = notFound
	}
	return reportAs(stderr, err, wantsJSON(args))
}
