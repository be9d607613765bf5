package testnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// UpOptions configure a local network of daemon processes.
type UpOptions struct {
	Binary string // the gleaner binary to run
	Nodes  int
	Dir    string // parent of the repos; a temporary directory (removed by Down) when empty
	// Network is the nodes' network: default a fresh private name of
	// this testnet's own (NewNetworkName), so that two testnets on one
	// host never merge. "local" and "testnet" join those networks.
	Network string
	// Providers is how many of the nodes (the first ones) sell simulated
	// GPUs, with an offer already set, so that the market has supply.
	Providers int
	// Workloads, when set, are the workloads the providers' offers allow
	// ("batch", "service"); empty leaves the offer's default (batch).
	Workloads []string
}

// demoSupply is what `testnet up --providers` sells: a spread of simulated
// hardware, regions and prices, so that queries have something to sort.
var demoSupply = []struct{ gpus, region, bronze, silver string }{
	{"2xRTX4090", "eu/DE", "0.35", "0.60"},
	{"1xH100", "na/US", "1.80", "2.40"},
	{"4xA100-80GB", "eu/NL", "1.10", "1.50"},
	{"1xL4", "as/SG", "0.20", "0.30"},
	{"8xH100", "na/CA", "1.70", "2.20"},
}

// Proc is one daemon of a local testnet.
type Proc struct {
	Index  int    `json:"index"`
	Repo   string `json:"repo"`
	PeerID string `json:"peer_id"`
	RPCURL string `json:"rpc_url"`
	Addr   string `json:"addr"` // a dialable multiaddr ending in /p2p/<id>
	Log    string `json:"log"`
	cmd    *exec.Cmd
	done   chan struct{}
}

// Local is a running local testnet.
type Local struct {
	Procs   []*Proc
	Network string // the nodes' network name
	dir     string
	ownDir  bool
}

// Up starts opts.Nodes daemons on loopback. Node 0 starts first; the others
// bootstrap from it and find each other through the DHT. On error every
// process already started is stopped.
func Up(ctx context.Context, opts UpOptions) (*Local, error) {
	if opts.Nodes < 1 || opts.Nodes > 64 {
		return nil, fmt.Errorf("--nodes %d: use 1 to 64", opts.Nodes)
	}
	if opts.Providers < 0 || opts.Providers > opts.Nodes {
		return nil, fmt.Errorf("--providers %d: use 0 to --nodes (%d)", opts.Providers, opts.Nodes)
	}
	if opts.Network == "" {
		opts.Network = NewNetworkName()
	}
	l := &Local{dir: opts.Dir, Network: opts.Network}
	if l.dir == "" {
		d, err := os.MkdirTemp("", "gleaner-testnet-")
		if err != nil {
			return nil, err
		}
		l.dir, l.ownDir = d, true
	}
	for i := 0; i < opts.Nodes; i++ {
		var boot string
		if i > 0 {
			boot = l.Procs[0].Addr
		}
		p, err := l.start(ctx, opts, i, boot)
		if err != nil {
			_ = l.Down()
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		l.Procs = append(l.Procs, p)
	}
	for i := 0; i < opts.Providers && i < len(l.Procs); i++ {
		if err := l.setDemoOffer(ctx, i, opts.Workloads); err != nil {
			_ = l.Down()
			return nil, fmt.Errorf("node %d offer: %w", i, err)
		}
	}
	return l, nil
}

func (l *Local) setDemoOffer(ctx context.Context, i int, workloads []string) error {
	c, err := l.Client(i)
	if err != nil {
		return err
	}
	d := demoSupply[i%len(demoSupply)]
	patch := offers.Patch{Region: &d.region, PriceBronze: &d.bronze, PriceSilver: &d.silver}
	if len(workloads) > 0 {
		patch.Workloads = &workloads
	}
	var res node.OfferShowResult
	if err := c.Call(ctx, "offer_set", patch, &res); err != nil {
		return err
	}
	if !res.Offered {
		return errors.New(res.Reason)
	}
	return nil
}

func (l *Local) start(ctx context.Context, opts UpOptions, i int, boot string) (*Proc, error) {
	dir := filepath.Join(l.dir, fmt.Sprintf("node%02d", i))
	initArgs := []string{"--repo", dir, "init", "--network", opts.Network}
	if opts.Network != repo.NetworkLocal && opts.Network != repo.NetworkTestnet {
		// A name of the caller's own: the CLI makes it only when asked.
		initArgs = append(initArgs, "--private")
	}
	if out, err := exec.CommandContext(ctx, opts.Binary, initArgs...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("init: %v: %s", err, out)
	}
	args := []string{"--repo", dir, "daemon", "--json", "--mdns=false",
		"--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0/quic-v1",
		"--rpc", "127.0.0.1:0"}
	if boot != "" {
		args = append(args, "--bootstrap", boot)
	}
	if i < opts.Providers {
		args = append(args, "--simulate-gpus", demoSupply[i%len(demoSupply)].gpus)
	}
	logPath := filepath.Join(dir, "daemon.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(opts.Binary, args...)
	cmd.Stderr = logf
	// Pdeathsig: if this process dies, even by SIGKILL, the kernel sends
	// the daemons SIGTERM, so a testnet never outlives its parent. Setpgid
	// keeps a terminal's Ctrl-C away from the daemons: this process stops
	// them, once, and a second signal would make them skip clean shutdown.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{Index: i, Repo: dir, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	ready := make(chan error, 1)
	go func() {
		var ev struct {
			PeerID string   `json:"peer_id"`
			Addrs  []string `json:"addrs"`
			RPCURL string   `json:"rpc_url"`
		}
		err := json.NewDecoder(stdout).Decode(&ev)
		if err == nil {
			p.PeerID, p.RPCURL = ev.PeerID, ev.RPCURL
			if len(ev.Addrs) > 0 {
				p.Addr = ev.Addrs[0]
			}
		}
		ready <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("daemon did not start (see %s): %v", logPath, err)
		}
		return p, nil
	case <-time.After(20 * time.Second):
		p.stop()
		return nil, fmt.Errorf("daemon not ready after 20 s (see %s)", logPath)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// stop sends SIGTERM, waits for the clean-shutdown budget plus a margin,
// then SIGKILLs.
func (p *Proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(7 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Client returns an RPC client for node i.
func (l *Local) Client(i int) (*rpc.Client, error) {
	r, err := repo.OpenRepo(l.Procs[i].Repo)
	if err != nil {
		return nil, err
	}
	tok, err := r.Token()
	if err != nil {
		return nil, err
	}
	return rpc.NewClient(l.Procs[i].RPCURL, tok), nil
}

// PeerCounts asks every node how many peers it has.
func (l *Local) PeerCounts(ctx context.Context) ([]int, error) {
	out := make([]int, len(l.Procs))
	for i := range l.Procs {
		c, err := l.Client(i)
		if err != nil {
			return nil, err
		}
		var info node.InfoResult
		if err := c.Call(ctx, "node_info", nil, &info); err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		out[i] = info.Peers
	}
	return out, nil
}

// Down stops every daemon in parallel and removes a temporary directory.
func (l *Local) Down() error {
	done := make(chan struct{}, len(l.Procs))
	for _, p := range l.Procs {
		go func() { p.stop(); done <- struct{}{} }()
	}
	for range l.Procs {
		<-done
	}
	var err error
	if l.ownDir {
		err = os.RemoveAll(l.dir)
	}
	return errors.Join(err)
}

// Dir is the directory that holds the nodes' repos.
func (l *Local) Dir() string { return l.dir }
