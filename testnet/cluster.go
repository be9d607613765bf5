// Package testnet starts whole gleaner networks for tests and demos: an
// in-process cluster of full nodes (Cluster) and a local network of daemon
// processes (Up). Only cmd and tests import it.
package testnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"
)

// ClusterOptions configure an in-process cluster.
type ClusterOptions struct {
	Nodes   int
	Network string       // default "local"
	Dir     string       // parent of the repos; a temporary directory when empty
	Logger  *slog.Logger // default: discard
	// Fanout is how many earlier nodes each node bootstraps from (default 1):
	// a sparse graph, so that discovery has real work to do.
	Fanout int
	// Bootstrap is added to every node's bootstrap list, to attach the
	// cluster to a node outside it (a daemon under measurement, say).
	Bootstrap []string
	// Configure, when set, edits node i's config before it starts (give
	// some nodes simulated GPUs, say).
	Configure func(i int, cfg *repo.Config)
	// OfferTTL shortens offer lifetimes for tests of expiry.
	OfferTTL time.Duration
	// Tune, when set, edits node i's runtime options (billing interval,
	// fault injection) before it starts.
	Tune func(i int, o *node.Options)
	// LinkLatency, when set, connects the nodes over libp2p's mocknet with
	// this one-way latency on every link instead of loopback TCP: a
	// network with real round trips on one machine whose kernel may lack
	// netem. RPC stays on loopback.
	LinkLatency time.Duration
}

// Cluster is N full nodes in this process, each with its own repo, on
// loopback TCP, with RPC on a free port.
type Cluster struct {
	mn     mocknet.Mocknet // nil on loopback TCP
	opts   ClusterOptions
	cfgs   []repo.Config
	nodes  []*node.Node
	dir    string
	ownDir bool
}

// NewCluster starts opts.Nodes nodes. Node i bootstraps from up to Fanout
// earlier nodes chosen deterministically, never from all of them.
func NewCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	if opts.Nodes < 1 {
		return nil, errors.New("testnet: need at least one node")
	}
	if opts.Network == "" {
		opts.Network = repo.NetworkLocal
	}
	if opts.Fanout < 1 {
		opts.Fanout = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{dir: opts.Dir, opts: opts}
	if opts.LinkLatency > 0 {
		c.mn = mocknet.New()
		c.mn.SetLinkDefaults(mocknet.LinkOptions{Latency: opts.LinkLatency})
	}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "gleaner-cluster-")
		if err != nil {
			return nil, err
		}
		c.dir, c.ownDir = d, true
	}
	for i := 0; i < opts.Nodes; i++ {
		n, err := c.startNode(ctx, i, opts)
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("testnet: node %d: %w", i, err)
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

func (c *Cluster) startNode(ctx context.Context, i int, opts ClusterOptions) (*node.Node, error) {
	cfg := repo.DefaultConfig(opts.Network)
	cfg.P2P.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.P2P.MDNS = false
	cfg.P2P.NATTraversal = false
	cfg.P2P.DHTMode = "server"
	cfg.RPC.Address = "127.0.0.1:0"
	cfg.P2P.Bootstrap = append(cfg.P2P.Bootstrap, opts.Bootstrap...)
	if opts.Configure != nil {
		opts.Configure(i, &cfg)
	}
	for k := 1; k <= opts.Fanout && k <= i; k++ {
		// Parents (i-1)/2, then (i-1)/2 - 1, ...: a tree, plus extra edges.
		parent := c.nodes[((i-1)/2+k-1)%i]
		for _, a := range parent.Host().Addrs() {
			cfg.P2P.Bootstrap = append(cfg.P2P.Bootstrap, a.String())
		}
	}
	dir, err := repo.InitRepo(filepath.Join(c.dir, fmt.Sprintf("node%02d", i)), cfg)
	if err != nil {
		return nil, err
	}
	c.cfgs = append(c.cfgs, cfg)
	return c.run(ctx, i, dir, cfg)
}

func (c *Cluster) run(ctx context.Context, i int, dir *repo.Repo, cfg repo.Config) (*node.Node, error) {
	o := node.Options{Logger: c.opts.Logger.With("node", i), InProcess: true, OfferTTL: c.opts.OfferTTL}
	if c.opts.Tune != nil {
		c.opts.Tune(i, &o)
	}
	if c.mn != nil {
		o.WrapHost = func(_ context.Context, key crypto.PrivKey) (host.Host, error) {
			h, err := c.mn.AddPeer(key, ma.StringCast(fmt.Sprintf("/ip4/127.0.%d.%d/tcp/4030", 100+i/250, i%250+1)))
			if err != nil {
				return nil, err
			}
			return h, c.mn.LinkAll() // the new node can reach every earlier one
		}
	}
	n, err := node.New(dir, cfg, o)
	if err != nil {
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// Restart stops node i and starts it again from its repo: same identity,
// same store, new process state, as after a crash or an upgrade.
func (c *Cluster) Restart(ctx context.Context, i int) (*node.Node, error) {
	old := c.nodes[i]
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := old.Stop(stopCtx); err != nil {
		return nil, err
	}
	n, err := c.run(ctx, i, old.Repo(), c.cfgs[i])
	if err != nil {
		return nil, err
	}
	c.nodes[i] = n
	return n, nil
}

// Add starts one more node, which bootstraps like the others: a late
// joiner.
func (c *Cluster) Add(ctx context.Context) (*node.Node, error) {
	n, err := c.startNode(ctx, len(c.nodes), c.opts)
	if err != nil {
		return nil, err
	}
	c.nodes = append(c.nodes, n)
	return n, nil
}

// Nodes returns the running nodes in start order.
func (c *Cluster) Nodes() []*node.Node { return c.nodes }

// Client returns an RPC client for node i, as the CLI would build it.
func (c *Cluster) Client(i int) (*rpc.Client, error) {
	n := c.nodes[i]
	tok, err := n.Repo().Token()
	if err != nil {
		return nil, err
	}
	return rpc.NewClient(n.RPCURL(), tok), nil
}

// Close stops every node, in parallel, and removes a temporary directory.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, len(c.nodes))
	for _, n := range c.nodes {
		go func() { errs <- n.Stop(ctx) }()
	}
	var first error
	for range c.nodes {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if c.ownDir {
		_ = os.RemoveAll(c.dir)
	}
	return first
}
