package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/urfave/cli/v2"
)

// openRepo opens the repo named by --repo, explaining how to create one.
func openRepo(c *cli.Context) (*repo.Repo, error) {
	dir := c.String("repo")
	r, err := repo.OpenRepo(dir)
	if errors.Is(err, repo.ErrNoRepo) {
		return nil, withHint(fmt.Errorf("no gleaner repo at %s", dir), "create one with `gleaner init`, or point --repo / GLEANER_REPO at an existing one")
	}
	return r, err
}

// nodeClient is the CLI's connection to the running daemon.
type nodeClient struct {
	*rpc.Client
	dir string
}

func dial(c *cli.Context) (*nodeClient, error) {
	r, err := openRepo(c)
	if err != nil {
		return nil, err
	}
	noDaemon := withHint(fmt.Errorf("no daemon is running for the repo at %s", r.Dir), "start one with `gleaner daemon`")
	url, err := r.URL()
	if errors.Is(err, repo.ErrNotRunning) {
		return nil, noDaemon
	}
	if err != nil {
		return nil, err
	}
	tok, err := r.Token()
	if err != nil {
		return nil, err
	}
	return &nodeClient{Client: rpc.NewClient(url, tok), dir: r.Dir}, nil
}

// call invokes one method and turns an unreachable endpoint (a daemon that
// crashed and left rpc.url behind) into the same advice as no daemon at all.
func (nc *nodeClient) call(ctx context.Context, method string, params, result any) error {
	err := nc.Call(ctx, method, params, result)
	if errors.Is(err, rpc.ErrUnreachable) {
		return withHint(fmt.Errorf("no daemon is answering for the repo at %s (it may have crashed)", nc.dir), "start one with `gleaner daemon`")
	}
	return err
}

// callCmd dials the daemon and invokes one method in a single step.
func callCmd(c *cli.Context, method string, params, result any) error {
	nc, err := dial(c)
	if err != nil {
		return err
	}
	return nc.call(c.Context, method, params, result)
}
