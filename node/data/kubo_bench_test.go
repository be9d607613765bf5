package data

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// kubo runs the same transfer as BenchmarkFetch between kubo daemons, the
// best-known IPFS implementation, so that the table has the ratio to it.
// GLEANER_KUBO names an ipfs binary, built outside the repo
// (docs/PERFORMANCE.md says how), e.g.
//
//	GLEANER_KUBO=/tmp/kubo/ipfs go test -run '^$' -bench 'Fetch/kubo' ./node/data
//
// Each daemon has its own repo made by `ipfs init --profile=test`
// (loopback only, no bootstrap, no mDNS) with Routing.Type none: kubo's
// default datastore, flatfs for blocks with sync on, as the gleaner store.
// The seeders `ipfs add` the file with the same DAG parameters as gleaner's
// import (CIDv1, raw leaves, 256 KiB chunks); the fetcher is connected to
// each and times `pin add` of the root over its HTTP RPC API: every
// block fetched, stored and the root pinned, what gleaner's Fetch does.
// Between rounds the fetcher unpins and collects garbage, untimed.

// kuboEnv is the variable naming the ipfs binary.
const kuboEnv = "GLEANER_KUBO"

type kuboNode struct {
	bin, repo string
	cmd       *exec.Cmd
	api       string // http://127.0.0.1:port
}

// kuboSeeders are the three seeding daemons, started on first use and
// shared by kubo/peers=1 and kubo/peers=3.
var kuboSeeders struct {
	nodes []*kuboNode
	root  string
	file  string
}

// kuboFetch returns bytes/s of a kubo fetch of the file at p from peers
// seeders, into a fetcher whose flatfs syncs each block when syncBlocks,
// or skips the benchmark (loudly) without GLEANER_KUBO.
func kuboFetch(b *testing.B, p string, size int64, peers int, syncBlocks bool) float64 {
	bin := os.Getenv(kuboEnv)
	if bin == "" {
		// Said on stderr too: a skipped benchmark prints nothing without -v.
		msg := fmt.Sprintf("%s SKIPPED: no kubo comparison: set %s to an ipfs binary built outside the repo (docs/PERFORMANCE.md says how)", b.Name(), kuboEnv)
		fmt.Fprintln(os.Stderr, msg)
		b.Skip(msg)
	}
	b.StopTimer()
	if kuboSeeders.file != p {
		for _, n := range kuboSeeders.nodes {
			n.stop()
		}
		kuboSeeders.nodes, kuboSeeders.root, kuboSeeders.file = nil, "", p
		for i := 0; i < 3; i++ {
			n := startKubo(b, bin, filepath.Join(b.TempDir(), "seeder"), false)
			kuboSeeders.nodes = append(kuboSeeders.nodes, n)
			out, err := n.cli("add", "-Q", "--cid-version=1", "--raw-leaves", "--chunker=size-262144", "--pin=true", p)
			if err != nil {
				b.Fatalf("kubo add: %v: %s", err, out)
			}
			root := strings.TrimSpace(out)
			if kuboSeeders.root != "" && kuboSeeders.root != root {
				b.Fatalf("kubo seeders added %s and %s", kuboSeeders.root, root)
			}
			kuboSeeders.root = root
		}
		b.Cleanup(func() {
			for _, n := range kuboSeeders.nodes {
				n.stop()
			}
			kuboSeeders.nodes, kuboSeeders.file = nil, ""
		})
	}
	f := startKubo(b, bin, filepath.Join(b.TempDir(), "fetcher"), syncBlocks)
	defer f.stop()
	for _, s := range kuboSeeders.nodes[:peers] {
		var id struct {
			ID        string
			Addresses []string
		}
		if err := s.rpc("id", nil, &id); err != nil {
			b.Fatal(err)
		}
		connected := false
		for _, a := range id.Addresses {
			if strings.Contains(a, "/tcp/") && strings.HasPrefix(a, "/ip4/127.0.0.1/") {
				if err := f.rpc("swarm/connect", url.Values{"arg": {a}}, nil); err != nil {
					b.Fatal(err)
				}
				connected = true
				break
			}
		}
		if !connected {
			b.Fatalf("kubo seeder %s has no loopback TCP address: %v", id.ID, id.Addresses)
		}
	}
	b.SetBytes(size)
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		b.StartTimer()
		if err := f.rpc("pin/add", url.Values{"arg": {kuboSeeders.root}, "progress": {"false"}}, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		elapsed += time.Since(start)
		if err := f.rpc("pin/rm", url.Values{"arg": {kuboSeeders.root}}, nil); err != nil {
			b.Fatal(err)
		}
		if err := f.rpc("repo/gc", nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("kubo %s, root %s", bin, kuboSeeders.root)
	return float64(size) * float64(b.N) / elapsed.Seconds()
}

// kuboSyncSpec is kubo's default datastore (flatfs for /blocks, leveldb
// for the rest) with flatfs's sync on: each block file synced before its
// rename, as gleaner's store does.
const kuboSyncSpec = `{"type":"mount","mounts":[` +
	`{"mountpoint":"/blocks","type":"flatfs","prefix":"flatfs.datastore","path":"blocks","sync":true,"shardFunc":"/repo/flatfs/shard/v1/next-to-last/2"},` +
	`{"mountpoint":"/","type":"levelds","prefix":"leveldb.datastore","path":"datastore","compression":"none"}]}`

// startKubo makes a repo in dir and starts a daemon on it, waiting until
// its API answers; syncBlocks turns flatfs's sync on.
func startKubo(b *testing.B, bin, dir string, syncBlocks bool) *kuboNode {
	b.Helper()
	n := &kuboNode{bin: bin, repo: dir}
	if out, err := n.cli("init", "--profile=test", "-e"); err != nil {
		b.Fatalf("ipfs init: %v: %s", err, out)
	}
	config := [][]string{{"Routing.Type", "none"}}
	if syncBlocks {
		config = append(config, []string{"--json", "Datastore.Spec", kuboSyncSpec})
	}
	for _, kv := range config {
		if out, err := n.cli(append([]string{"config"}, kv...)...); err != nil {
			b.Fatalf("ipfs config %v: %v: %s", kv, err, out)
		}
	}
	n.cmd = exec.Command(bin, "daemon", "--enable-gc=false")
	n.cmd.Env = n.env()
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	n.cmd.Stderr = n.cmd.Stdout
	if err := n.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), "Daemon is ready") {
				ready <- nil
				io.Copy(io.Discard, stdout)
				return
			}
		}
		ready <- fmt.Errorf("kubo daemon ended before it was ready: %s", strings.Join(lines, "\n"))
	}()
	select {
	case err := <-ready:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		n.stop()
		b.Fatal("kubo daemon not ready after 2 minutes")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "api"))
	if err != nil {
		n.stop()
		b.Fatal(err)
	}
	m, err := ma.NewMultiaddr(strings.TrimSpace(string(raw)))
	if err != nil {
		n.stop()
		b.Fatal(err)
	}
	_, hostport, err := manet.DialArgs(m)
	if err != nil {
		n.stop()
		b.Fatal(err)
	}
	n.api = "http://" + hostport
	b.Cleanup(n.stop)
	return n
}

func (n *kuboNode) env() []string {
	return append(os.Environ(), "IPFS_PATH="+n.repo)
}

func (n *kuboNode) cli(args ...string) (string, error) {
	cmd := exec.Command(n.bin, args...)
	cmd.Env = n.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// rpc calls the daemon's HTTP RPC API and decodes the last JSON value of
// the answer into out (nil: read and drop it).
func (n *kuboNode) rpc(cmd string, args url.Values, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.api+"/api/v0/"+cmd+"?"+args.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("kubo %s: %w", cmd, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("kubo %s: %w", cmd, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("kubo %s: %s: %s", cmd, resp.Status, body)
	}
	if e := resp.Trailer.Get("X-Stream-Error"); e != "" {
		return fmt.Errorf("kubo %s: %s", cmd, e)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("kubo %s: %w: %s", cmd, err, body)
		}
	}
	return nil
}

func (n *kuboNode) stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	n.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		n.cmd.Process.Kill()
		<-done
	}
	n.cmd = nil
}
