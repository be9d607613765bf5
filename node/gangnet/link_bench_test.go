package gangnet

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

// BenchmarkGangForwardOverALink is BenchmarkGangForwardThroughput where the
// hop between the two providers crosses a link of GLEANER_GANG_LINK (tc's
// rate syntax; 1gbit unless set), as it does between two owners'
// machines, and so does the direct connection's one hop: the question a
// user asks is how much of the link a gang's traffic gets. The two links
// are htb classes on the loopback of a network namespace of the
// benchmark's own (the benchmark runs itself again under unshare --net,
// as root), matched by port: the direct path's container port, and the
// providers' libp2p connection from rank 0's side. The forward's other two
// hops (process to rank 0's listener, rank 1's provider to the container)
// stay on the unshaped loopback, as they are on one machine. Ratio is
// forwarded throughput over direct.
//
//	GLEANER_GANG_LINK=1gbit go test -run '^$' -bench GangForwardOverALink -benchtime 20x ./node/gangnet
func BenchmarkGangForwardOverALink(b *testing.B) {
	rate := os.Getenv("GLEANER_GANG_LINK")
	if rate == "" {
		rate = "1gbit"
	}
	if os.Getenv(linkChildEnv) == "" {
		reportChild(b, benchInOwnNetns(b))
		return
	}
	run(b, "ip", "link", "set", "lo", "up")
	direct, fwd, rig := benchRigPaths(b, benchChunk)
	shapeLinks(b, rate, direct, rig)
	throughput(b, direct, fwd)
}

const linkChildEnv = "GLEANER_GANG_LINK_NETNS"

// shapeLinks limits to rate, each in a class of its own, the direct
// connection's packets to the container and rank 0's provider's packets
// to rank 1's on their libp2p connection.
func shapeLinks(b *testing.B, rate string, direct net.Conn, rig *gangRig) {
	// The benchmark function runs more than once (b.N 1, then the
	// asked N), each with new ports: start from a bare loopback.
	_ = exec.Command("tc", "qdisc", "del", "dev", "lo", "root").Run()
	run(b, "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10")
	run(b, "tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", "400gbit")
	for i, m := range []struct{ dir, port string }{
		{"dport", strconv.Itoa(direct.RemoteAddr().(*net.TCPAddr).Port)},
		{"sport", providersPort(b, rig)},
	} {
		class := fmt.Sprintf("1:%d", 20+i)
		run(b, "tc", "class", "add", "dev", "lo", "parent", "1:", "classid", class, "htb", "rate", rate, "ceil", rate)
		run(b, "tc", "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", m.dir, m.port, "0xffff", "flowid", class)
	}
}

// providersPort is rank 0's provider's port on its one connection with
// rank 1's: what rank 1 dialled, so rank 0 sends from it.
func providersPort(b *testing.B, rig *gangRig) string {
	for _, c := range rig.provs[1].h.LibP2P().Network().ConnsToPeer(rig.provs[0].h.ID()) {
		for _, code := range []int{ma.P_TCP, ma.P_UDP} {
			if p, err := c.RemoteMultiaddr().ValueForProtocol(code); err == nil {
				return p
			}
		}
	}
	b.Fatal("rank 1's provider has no connection to rank 0's")
	return ""
}

// benchInOwnNetns runs b's benchmark again, with b.N iterations, in a new
// network namespace, and returns its output; b fails with the output if
// the child did not pass.
func benchInOwnNetns(b *testing.B) []byte {
	if _, err := exec.LookPath("unshare"); err != nil {
		b.Fatalf("%s needs unshare (util-linux), tc and ip (iproute2) and root: %v", b.Name(), err)
	}
	cmd := exec.Command("unshare", "--net", os.Args[0], "-test.run=^$", "-test.bench=^"+b.Name()+"$",
		fmt.Sprintf("-test.benchtime=%dx", b.N), "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), linkChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("\nPASS")) {
		b.Fatalf("%s in its own network namespace (needs root, unshare, tc with htb and u32): %v\n%s", b.Name(), err, out)
	}
	return out
}

// reportChild reports as b's the metrics of the child's result line.
func reportChild(b *testing.B, out []byte) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], b.Name()) {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				b.Fatalf("the child's result line %q: %v", sc.Text(), err)
			}
			if f[i+1] != "ns/op" && !strings.HasSuffix(f[i+1], "MB/s") {
				b.ReportMetric(v, f[i+1])
			}
		}
		return
	}
	b.Fatalf("no result line for %s in the child's output:\n%s", b.Name(), out)
}

// run runs a command, failing b with its output.
func run(b *testing.B, name string, args ...string) {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
