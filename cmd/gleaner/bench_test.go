package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/testnet"
)

func repoClient(b *testing.B, dir string) *rpc.Client {
	r, err := repo.OpenRepo(dir)
	if err != nil {
		b.Fatal(err)
	}
	url, err := r.URL()
	if err != nil {
		b.Fatal(err)
	}
	tok, err := r.Token()
	if err != nil {
		b.Fatal(err)
	}
	return rpc.NewClient(url, tok)
}

// BenchmarkDaemonStartup measures, per start of the real binary, the time
// from exec to a served RPC call and to the first connected peer (a
// bootstrap daemon is already running). As the limit in the same run it
// times `gleaner version`, the cost of merely starting the process.
func BenchmarkDaemonStartup(b *testing.B) {
	bootRepo := filepath.Join(b.TempDir(), "boot")
	if out, err := exec.Command(binPath, "--repo", bootRepo, "init", "--network", "local").CombinedOutput(); err != nil {
		b.Fatalf("init: %v %s", err, out)
	}
	boot := startDaemon(b, bootRepo)
	defer boot.stop(b, syscall.SIGTERM)

	var execTotal, rpcTotal, peerTotal time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "n"+strconv.Itoa(i))
		if out, err := exec.Command(binPath, "--repo", dir, "init", "--network", "local").CombinedOutput(); err != nil {
			b.Fatalf("init: %v %s", err, out)
		}
		start := time.Now()
		if err := exec.Command(binPath, "version").Run(); err != nil {
			b.Fatal(err)
		}
		execTotal += time.Since(start)
		b.StartTimer()

		start = time.Now()
		cmd := exec.Command(binPath, "--repo", dir, "daemon", "--mdns=false", "--listen", "/ip4/127.0.0.1/tcp/0",
			"--rpc", "127.0.0.1:0", "--bootstrap", boot.addrs[0])
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var rpcReady, peerReady time.Duration
		var cl *rpc.Client
		for peerReady == 0 {
			if time.Since(start) > 20*time.Second {
				b.Fatal("daemon not ready with a peer after 20 s")
			}
			if cl == nil {
				if _, err := os.Stat(filepath.Join(dir, repo.URLFile)); err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				cl = repoClient(b, dir)
			}
			var info node.InfoResult
			if err := cl.Call(context.Background(), "node_info", nil, &info); err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			if rpcReady == 0 {
				rpcReady = time.Since(start)
			}
			if info.Peers >= 1 {
				peerReady = time.Since(start)
			} else {
				time.Sleep(time.Millisecond)
			}
		}
		rpcTotal += rpcReady
		peerTotal += peerReady
		b.StopTimer()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(rpcTotal.Microseconds())/n/1000, "rpc-ready-ms")
	b.ReportMetric(float64(peerTotal.Microseconds())/n/1000, "first-peer-ms")
	b.ReportMetric(float64(execTotal.Microseconds())/n/1000, "bare-exec-ms")
	b.ReportMetric(float64(rpcTotal)/float64(execTotal), "rpc-ready/bare-exec")
}

// BenchmarkIdleDaemon20Peers attaches a 20-node in-process cluster to one
// real daemon, lets it settle, then samples the daemon's resident memory
// and CPU use over ten idle seconds.
func BenchmarkIdleDaemon20Peers(b *testing.B) {
	for i := 0; i < b.N; i++ {
		repo := filepath.Join(b.TempDir(), "idle")
		if out, err := exec.Command(binPath, "--repo", repo, "init", "--network", "local").CombinedOutput(); err != nil {
			b.Fatalf("init: %v %s", err, out)
		}
		d := startDaemon(b, repo)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cl, err := testnet.NewCluster(ctx, testnet.ClusterOptions{Nodes: 20, Bootstrap: d.addrs[:1]})
		if err != nil {
			b.Fatal(err)
		}
		rc := repoClient(b, repo)
		for {
			var info node.InfoResult
			if err := rc.Call(ctx, "node_info", nil, &info); err != nil {
				b.Fatal(err)
			}
			if info.Peers >= 20 {
				break
			}
			if ctx.Err() != nil {
				b.Fatalf("daemon has %d peers, want 20", info.Peers)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(3 * time.Second) // let discovery and DHT refresh settle
		pid := d.cmd.Process.Pid
		cpu0, at0 := cpuTicks(b, pid), time.Now()
		time.Sleep(10 * time.Second)
		cpu1, at1 := cpuTicks(b, pid), time.Now()
		rss := rssKiB(b, pid)
		// Linux reports CPU time in clock ticks of 1/100 s (USER_HZ).
		cpuPct := float64(cpu1-cpu0) / 100 / at1.Sub(at0).Seconds() * 100
		b.ReportMetric(float64(rss)/1024, "rss-MiB")
		b.ReportMetric(cpuPct, "cpu-%")
		cl.Close()
		cancel()
		d.stop(b, syscall.SIGTERM)
	}
}

func cpuTicks(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name, which may hold spaces: utime is the
	// 14th field overall, stime the 15th.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

func rssKiB(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return v
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
