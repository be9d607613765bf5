package data

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// seederEnv makes the test binary a seeder for BenchmarkFetch instead of
// running tests: it imports the file the variable names into a store of
// its own, serves it over bitswap on loopback, says its root and address
// on stdout and runs until its stdin closes. Seeders in processes of
// their own, as kubo's daemons are, share the cores with the fetcher the
// same way kubo's do, and the fetcher's peak heap is its own.
const seederEnv = "GLEANER_BENCH_SEEDER"

func TestMain(m *testing.M) {
	if p := os.Getenv(seederEnv); p != "" {
		if err := runSeeder(p); err != nil {
			fmt.Fprintln(os.Stderr, "seeder:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runSeeder(p string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "gleaner-bench-seeder")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := OpenStore(filepath.Join(dir, "blocks"), 1<<40)
	if err != nil {
		return err
	}
	defer st.Close()
	root, err := st.Add(ctx, p)
	if err != nil {
		return err
	}
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		return err
	}
	defer h.Close()
	x, err := NewExchange(ctx, ExchangeConfig{Host: h, ProtocolPrefix: testPrefix, Store: st})
	if err != nil {
		return err
	}
	defer x.Close()
	fmt.Printf("seeder %s %s/p2p/%s\n", root, h.Addrs()[0], h.ID())
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// benchSeeder is a seeder process as the benchmark sees it.
type benchSeeder struct {
	root cid.Cid
	addr peer.AddrInfo
}

// startSeeders starts n seeder processes of the file at p, at once, and
// stops them when b ends.
func startSeeders(b *testing.B, p string, n int) []benchSeeder {
	b.Helper()
	type started struct {
		s   benchSeeder
		err error
	}
	ch := make(chan started, n)
	for i := 0; i < n; i++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), seederEnv+"="+p)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			stdin.Close()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 3 || f[0] != "seeder" {
					continue
				}
				root, err := cid.Decode(f[1])
				if err != nil {
					ch <- started{err: err}
					return
				}
				m, err := ma.NewMultiaddr(f[2])
				if err != nil {
					ch <- started{err: err}
					return
				}
				ai, err := peer.AddrInfoFromP2pAddr(m)
				if err != nil {
					ch <- started{err: err}
					return
				}
				ch <- started{s: benchSeeder{root: root, addr: *ai}}
				io.Copy(io.Discard, stdout)
				return
			}
			ch <- started{err: fmt.Errorf("seeder ended before it served: %v", sc.Err())}
		}()
	}
	var out []benchSeeder
	for i := 0; i < n; i++ {
		select {
		case st := <-ch:
			if st.err != nil {
				b.Fatal(st.err)
			}
			if len(out) > 0 && !out[0].root.Equals(st.s.root) {
				b.Fatalf("seeders imported %s and %s", out[0].root, st.s.root)
			}
			out = append(out, st.s)
		case <-time.After(20 * time.Minute):
			b.Fatal("seeders not ready after 20 minutes")
		}
	}
	return out
}
