package testnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
)

// A test network of homes (issue 37), built of network namespaces on
// this machine:
//
//	            public segment 11.77.0.0/24 (a bridge in the hub namespace)
//	   ┌──────────────┬──────────────┬───────────────┬──────────────┐
//	 relay .10     renter .11    router .101     router .102 ...
//	 (--relay)                   MASQUERADE      MASQUERADE --random-fully
//	                             192.168.1.0/24  192.168.2.0/24
//	                             home node .2    home node .2
//
// The public segment uses addresses outside the private and reserved
// ranges on purpose: libp2p (AutoNAT, hole punching) treats 10/8 or
// 192.168/16 as LAN addresses and would neither dial them back nor punch
// to them. Nothing leaves the namespaces, so the addresses route nowhere.
//
// Each home is a router namespace (wan0 on the public segment, lan0 on
// the home's LAN) and a node namespace behind it, with a default route
// through the router. The router's NAT is iptables MASQUERADE:
//
//   - natCone keeps the source port when it can, one mapping for every
//     destination (endpoint-independent): hole punching works through it;
//   - natSymmetric is MASQUERADE --random-fully, a fresh random port for
//     each connection (endpoint-dependent, like a symmetric or carrier-
//     grade NAT): every peer sees another port and hole punching fails.
//
// Linux conntrack lets in only packets of the exact reply tuple in both
// cases (address- and port-dependent filtering), and the router's
// firewall drops what would open a connection from outside, so no one
// dials a home node unsolicited. Deleting the namespaces removes everything,
// iptables rules included; t.Cleanup does it even when the test fails.

type natKind string

const (
	natCone      natKind = "cone"      // MASQUERADE: endpoint-independent mapping
	natSymmetric natKind = "symmetric" // MASQUERADE --random-fully
)

const (
	pubNet   = "11.77.0"
	natPort  = "4001" // every node listens here, TCP and QUIC, in its own namespace
	relayIP  = pubNet + ".10"
	renterIP = pubNet + ".11"
	relay2IP = pubNet + ".12"
)

// requireNATNet is requireNetns plus iptables, which the routers need.
func requireNATNet(t testing.TB) {
	t.Helper()
	requireNetns(t)
	if _, err := exec.LookPath("iptables"); err != nil {
		if os.Getenv("GLEANER_SKIP_NETNS") == "1" {
			t.Skipf("skipped: this test builds NAT routers with iptables, which is not installed, and GLEANER_SKIP_NETNS=1 is set")
		}
		t.Fatalf("this needs iptables for the home routers' NAT (apt-get install iptables): %v", err)
	}
}

// homeNet is a built network of homes.
type homeNet struct {
	prefix string
	hub    string
	n      int // veth ports on the bridge so far
}

// home is one home: its router and the namespace of the node behind it.
type home struct {
	kind           natKind
	router, ns     string
	wanIP, lanNode string
}

func nsRun(t testing.TB, ns string, args ...string) {
	t.Helper()
	full := append([]string{"netns", "exec", ns}, args...)
	if out, err := exec.Command("ip", full...).CombinedOutput(); err != nil {
		t.Fatalf("ip netns exec %s %s: %v: %s", ns, strings.Join(args, " "), err, out)
	}
}

// newHomeNet builds the public segment: a bridge in a hub namespace.
func newHomeNet(t testing.TB) *homeNet {
	t.Helper()
	var r [3]byte
	_, _ = rand.Read(r[:])
	hn := &homeNet{prefix: "gnat" + hex.EncodeToString(r[:])}
	hn.hub = newNetns(t, hn.prefix, "hub")
	ipRun(t, "-n", hn.hub, "link", "set", "lo", "up")
	ipRun(t, "-n", hn.hub, "link", "add", "br0", "type", "bridge")
	ipRun(t, "-n", hn.hub, "link", "set", "br0", "up")
	return hn
}

// plug connects namespace ns to the public segment as dev with ip.
func (hn *homeNet) plug(t testing.TB, ns, dev, ip string) {
	t.Helper()
	port := fmt.Sprintf("p%d", hn.n)
	hn.n++
	ipRun(t, "link", "add", dev, "netns", ns, "type", "veth", "peer", "name", port, "netns", hn.hub)
	ipRun(t, "-n", hn.hub, "link", "set", port, "master", "br0")
	ipRun(t, "-n", hn.hub, "link", "set", port, "up")
	ipRun(t, "-n", ns, "addr", "add", ip+"/24", "dev", dev)
	ipRun(t, "-n", ns, "link", "set", dev, "up")
}

// public adds a namespace on the public segment at ip.
func (hn *homeNet) public(t testing.TB, name, ip string) string {
	t.Helper()
	ns := newNetns(t, hn.prefix, name)
	hn.plug(t, ns, "eth0", ip)
	return ns
}

// home adds home i (1..99): a router on the public segment at
// 11.77.0.(100+i) doing kind of NAT for 192.168.i.0/24, and the node's
// namespace at 192.168.i.2.
func (hn *homeNet) home(t testing.TB, i int, kind natKind) home {
	t.Helper()
	h := home{kind: kind, wanIP: fmt.Sprintf("%s.%d", pubNet, 100+i), lanNode: fmt.Sprintf("192.168.%d.2", i)}
	h.router = newNetns(t, hn.prefix, fmt.Sprintf("r%d", i))
	h.ns = newNetns(t, hn.prefix, fmt.Sprintf("h%d", i))
	hn.plug(t, h.router, "wan0", h.wanIP)
	ipRun(t, "link", "add", "lan0", "netns", h.router, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
	ipRun(t, "-n", h.router, "addr", "add", fmt.Sprintf("192.168.%d.1/24", i), "dev", "lan0")
	ipRun(t, "-n", h.router, "link", "set", "lan0", "up")
	ipRun(t, "-n", h.ns, "addr", "add", h.lanNode+"/24", "dev", "eth0")
	ipRun(t, "-n", h.ns, "link", "set", "eth0", "up")
	ipRun(t, "-n", h.ns, "route", "add", "default", "via", fmt.Sprintf("192.168.%d.1", i))
	nsRun(t, h.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	masq := []string{"iptables", "-w", "-t", "nat", "-A", "POSTROUTING", "-o", "wan0", "-j", "MASQUERADE"}
	if kind == natSymmetric {
		masq = append(masq, "--random-fully")
	}
	nsRun(t, h.router, masq...)
	// A home router's firewall: nothing from outside opens a connection.
	// Dropping it here, before conntrack confirms the entry, also keeps
	// an unsolicited packet (a peer dialling the home's public address
	// directly) from leaving behind a conntrack entry that holds the
	// very tuple a later hole punch needs: MASQUERADE would then pick
	// another port, and the punch would miss.
	for _, chain := range []string{"INPUT", "FORWARD"} {
		nsRun(t, h.router, "iptables", "-w", "-A", chain, "-i", "wan0", "-m", "conntrack", "--ctstate", "NEW,INVALID", "-j", "DROP")
	}
	return h
}

// natDaemon is a real `gleaner daemon` in a namespace of the home network.
type natDaemon struct {
	name, ns, repo, log, bin string
	peerID                   string
	ip                       string // the address peers on the public segment dial (its router's for a home node)
	cmd                      *exec.Cmd
	done                     chan struct{}
}

// natDaemonOpts are the flags a natDaemon starts with.
type natDaemonOpts struct {
	network   string
	bootstrap string // a multiaddr, or "" for none
	relay     bool
	gpus      string // --simulate-gpus, or "" for a node that sells nothing
	circuitS  int    // a relay's p2p.relay_circuit_s; 0: the default
	circuitMB int    // a relay's p2p.relay_circuit_mb; 0: the default
}

func startNATDaemon(t testing.TB, bin, dir, name, ns, ip string, o natDaemonOpts) *natDaemon {
	t.Helper()
	d := &natDaemon{name: name, ns: ns, bin: bin, ip: ip, repo: filepath.Join(dir, name), done: make(chan struct{})}
	d.log = filepath.Join(d.repo, "daemon.log")
	if out, err := exec.Command(bin, "--repo", d.repo, "init", "--network", o.network, "--private").CombinedOutput(); err != nil {
		t.Fatalf("gleaner init: %v: %s", err, out)
	}
	if o.circuitS != 0 || o.circuitMB != 0 {
		setConfigLine(t, d.repo, "relay_service = false", fmt.Sprintf("relay_circuit_s = %d\nrelay_circuit_mb = %d", o.circuitS, o.circuitMB))
	}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := []string{"netns", "exec", ns, bin, "--repo", d.repo, "daemon", "--json", "--mdns=false",
		"--listen", "/ip4/0.0.0.0/tcp/" + natPort, "--listen", "/ip4/0.0.0.0/udp/" + natPort + "/quic-v1",
		"--rpc", "127.0.0.1:0"}
	if lv := os.Getenv("GLEANER_NAT_LOGLEVEL"); lv != "" {
		args = append(args, "--log-level", lv)
	}
	if o.bootstrap != "" {
		args = append(args, "--bootstrap", o.bootstrap)
	}
	if o.relay {
		args = append(args, "--relay")
	}
	if o.gpus != "" {
		args = append(args, "--simulate-gpus", o.gpus)
	}
	d.cmd = exec.Command("ip", args...)
	d.cmd.Stderr = logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.stop()
		// GLEANER_NAT_KEEPLOGS=DIR keeps every daemon's log there.
		if keep := os.Getenv("GLEANER_NAT_KEEPLOGS"); keep != "" {
			_ = os.MkdirAll(keep, 0o755)
			_ = os.WriteFile(filepath.Join(keep, name+".log"), []byte(d.logText()), 0o644)
		}
	})
	d.peerID = awaitDaemonReady(t, stdout, fmt.Sprintf("daemon %s", name), d.logText)
	return d
}

// setConfigLine adds line after the line after in repoDir's config.toml
// (there is no command that sets a config key).
func setConfigLine(t testing.TB, repoDir, after, line string) {
	t.Helper()
	path := filepath.Join(repoDir, repo.ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\n"+after+"\n") {
		t.Fatalf("%s has no line %q", path, after)
	}
	b = []byte(strings.Replace(string(b), "\n"+after+"\n", "\n"+after+"\n"+line+"\n", 1))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// stop ends the daemon (SIGTERM, then SIGKILL); safe to call twice.
func (d *natDaemon) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(7 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// kill ends the daemon at once, as a crash or a pulled plug would.
func (d *natDaemon) kill() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

// addr is the multiaddr a public node dials d at: QUIC, as most nodes'
// first choice (libp2p ranks QUIC before TCP).
func (d *natDaemon) addr() string {
	return "/ip4/" + d.ip + "/udp/" + natPort + "/quic-v1/p2p/" + d.peerID
}

func (d *natDaemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// cli runs `gleaner <args>` against d, inside its namespace (its RPC
// listens on that namespace's loopback).
func (d *natDaemon) cli(args ...string) ([]byte, error) {
	full := append([]string{"netns", "exec", d.ns, d.bin, "--repo", d.repo}, args...)
	out, err := exec.Command("ip", full...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		err = fmt.Errorf("gleaner %s on %s: %v: %s", strings.Join(args, " "), d.name, err, ee.Stderr)
	}
	return out, err
}

// call invokes one RPC method through `gleaner rpc`.
func (d *natDaemon) call(method string, params, res any) error {
	args := []string{"rpc", method}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return err
		}
		args = append(args, string(b))
	}
	out, err := d.cli(args...)
	if err != nil {
		return err
	}
	if res == nil {
		return nil
	}
	return json.Unmarshal(out, res)
}

func (d *natDaemon) info(t testing.TB) node.InfoResult {
	t.Helper()
	var info node.InfoResult
	if err := d.call("node_info", nil, &info); err != nil {
		t.Fatal(err)
	}
	return info
}

// connsTo is d's live connections' remote addresses to peer id.
func (d *natDaemon) connsTo(t testing.TB, id string) []string {
	t.Helper()
	var ps []node.PeerResult
	if err := d.call("node_peers", nil, &ps); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.PeerID == id {
			return p.Addrs
		}
	}
	return nil
}

// directTo reports whether d holds a connection to id that does not go
// through a relay.
func (d *natDaemon) directTo(t testing.TB, id string) bool {
	for _, a := range d.connsTo(t, id) {
		if !strings.Contains(a, "/p2p-circuit") {
			return true
		}
	}
	return false
}

// waitFor polls ok every 200 ms until it holds or limit passes, then
// fails with what and every daemon's log tail.
func waitFor(t testing.TB, limit time.Duration, what string, ds []*natDaemon, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > limit {
			// The reason first: a CI log that keeps only the head and
			// the tail of a long failure keeps it.
			t.Errorf("%s: not after %v", what, limit)
			dumpLogs(t, ds)
			t.FailNow()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start)
}

// dumpLogs logs the last lines of each daemon's log.
func dumpLogs(t testing.TB, ds []*natDaemon) {
	t.Helper()
	for _, d := range ds {
		lines := strings.Split(d.logText(), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		t.Logf("--- last lines of %s (%s):\n%s", d.name, d.ns, strings.Join(lines, "\n"))
	}
}

// homesNet is the network the NAT tests share: a relay and a renter on
// the public segment; home 1 (cone NAT) and home 2 (symmetric NAT) each
// with a provider; home 3 (cone NAT) with a renter; home 4 (symmetric
// NAT) with a renter when asked for.
type homesNet struct {
	net                   *homeNet
	relay, renter         *natDaemon
	relay2                *natDaemon // homesOpts.relays 2 only
	coneProv, symProv     *natDaemon
	homeRenter            *natDaemon
	symRenter             *natDaemon // homesOpts.symRenter only
	coneHome, symHome     home
	renterHome            home
	all                   []*natDaemon
	network, bin, workdir string
}

// homesOpts are what a test asks of the network of homes beyond the
// five nodes every one has.
type homesOpts struct {
	relays    int  // 1 or 2
	symRenter bool // a renter in home 4, behind a symmetric NAT
	circuitS  int  // the relays' per-circuit duration in seconds; 0: the default
	circuitMB int  // the relays' per-circuit data each way in MiB; 0: the default
}

// Provider GPUs: each home provider sells another model, so that a job
// spec can name the provider it wants by model.
const (
	coneGPU = "RTX4090"
	symGPU  = "L4"
)

func startHomes(t testing.TB) *homesNet { return startHomesWith(t, homesOpts{relays: 1}) }

// startHomesRelays is startHomes with n relays (1 or 2).
func startHomesRelays(t testing.TB, n int) *homesNet {
	return startHomesWith(t, homesOpts{relays: n})
}

// startHomesWith builds the network of homes as o says. The second
// relay, at 11.77.0.12, is in no one's bootstrap list: the home nodes
// find it through the DHT, as AutoRelay's peer source must.
func startHomesWith(t testing.TB, o homesOpts) *homesNet {
	t.Helper()
	n := o.relays
	requireNATNet(t)
	hs := &homesNet{bin: gleanerBinary(t), network: NewNetworkName(), workdir: t.TempDir()}
	hs.net = newHomeNet(t)
	relayNS := hs.net.public(t, "relay", relayIP)
	renterNS := hs.net.public(t, "renter", renterIP)
	hs.coneHome = hs.net.home(t, 1, natCone)
	hs.symHome = hs.net.home(t, 2, natSymmetric)
	hs.renterHome = hs.net.home(t, 3, natCone)

	hs.relay = startNATDaemon(t, hs.bin, hs.workdir, "relay", relayNS, relayIP, natDaemonOpts{network: hs.network, relay: true, circuitS: o.circuitS, circuitMB: o.circuitMB})
	boot := hs.relay.addr()
	hs.renter = startNATDaemon(t, hs.bin, hs.workdir, "renter", renterNS, renterIP, natDaemonOpts{network: hs.network, bootstrap: boot})
	hs.coneProv = startNATDaemon(t, hs.bin, hs.workdir, "cone-provider", hs.coneHome.ns, hs.coneHome.wanIP, natDaemonOpts{network: hs.network, bootstrap: boot, gpus: "1x" + coneGPU})
	hs.symProv = startNATDaemon(t, hs.bin, hs.workdir, "symmetric-provider", hs.symHome.ns, hs.symHome.wanIP, natDaemonOpts{network: hs.network, bootstrap: boot, gpus: "1x" + symGPU})
	hs.homeRenter = startNATDaemon(t, hs.bin, hs.workdir, "home-renter", hs.renterHome.ns, hs.renterHome.wanIP, natDaemonOpts{network: hs.network, bootstrap: boot})
	hs.all = []*natDaemon{hs.relay, hs.renter, hs.coneProv, hs.symProv, hs.homeRenter}
	if n > 1 {
		ns := hs.net.public(t, "relay2", relay2IP)
		hs.relay2 = startNATDaemon(t, hs.bin, hs.workdir, "relay2", ns, relay2IP, natDaemonOpts{network: hs.network, bootstrap: boot, relay: true, circuitS: o.circuitS, circuitMB: o.circuitMB})
		hs.all = append(hs.all, hs.relay2)
	}
	if o.symRenter {
		h := hs.net.home(t, 4, natSymmetric)
		hs.symRenter = startNATDaemon(t, hs.bin, hs.workdir, "symmetric-renter", h.ns, h.wanIP, natDaemonOpts{network: hs.network, bootstrap: boot})
		hs.all = append(hs.all, hs.symRenter)
	}
	return hs
}

// setHomeOffer makes d offer its GPUs at a fixed price.
func setHomeOffer(t testing.TB, d *natDaemon) {
	t.Helper()
	region, bronze, silver := "eu/DE", "0.30", "0.50"
	var res node.OfferShowResult
	if err := d.call("offer_set", map[string]any{"region": region, "price_bronze": bronze, "price_silver": silver}, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Offered {
		t.Fatalf("%s offers nothing: %s", d.name, res.Reason)
	}
}

// book is the providers in d's order book.
func (d *natDaemon) book(t testing.TB) map[string]bool {
	t.Helper()
	var res node.MarketOffersResult
	if err := d.call("market_offers", node.MarketOffersParams{Limit: 1000}, &res); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, o := range res.Offers {
		out[o.Provider] = true
	}
	return out
}

// natJobSpec is a short demo job for one GPU of the given model.
func natJobSpec(name, model string, args ...string) string {
	return fmt.Sprintf(`name: %s
image: %s
command: [%s]
resources: {gpus: 1, models: [%s]}
tier: silver
max_price: 1.00
duration: {expected: 1m, max: 10m}
allow_simulated: true
`, name, DemoImage, strings.Join(quoteAll(args), ", "), model)
}

// runJob submits spec at r and waits for it to end; it returns the final
// record and how long submit-to-running took.
func runJob(t testing.TB, r *natDaemon, spec string, limit time.Duration, ds []*natDaemon) (renting.JobRecord, time.Duration) {
	t.Helper()
	var j renting.JobRecord
	start := time.Now()
	if err := r.call("job_submit", node.JobSubmitParams{Spec: spec}, &j); err != nil {
		t.Fatal(err)
	}
	return awaitJob(t, r, j, start, limit, ds)
}

// awaitJob waits for the submitted job j to end; it returns the final
// record and how long from start to running took.
func awaitJob(t testing.TB, r *natDaemon, j renting.JobRecord, start time.Time, limit time.Duration, ds []*natDaemon) (renting.JobRecord, time.Duration) {
	t.Helper()
	var running time.Duration
	deadline := time.Now().Add(limit)
	for {
		if err := r.call("job_status", node.JobIDParams{ID: j.ID}, &j); err != nil {
			t.Fatal(err)
		}
		if running == 0 && (j.State == renting.StateRunning || j.State == renting.StateCompleted) {
			running = time.Since(start)
		}
		if ended(j.State) || j.State == renting.StateCancelled {
			if j.State != renting.StateCompleted {
				var ex json.RawMessage
				_ = r.call("job_explain", node.JobIDParams{ID: j.ID}, &ex)
				t.Logf("job %s ended %s; explain: %s", j.ID, j.State, ex)
			}
			return j, running
		}
		if time.Now().After(deadline) {
			dumpLogs(t, ds)
			t.Fatalf("job %s is %s after %v (error %q)", j.ID, j.State, limit, j.Error)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var _ = context.Background
