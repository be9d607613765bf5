package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"
)

// needFirewall skips, loudly, where the rule cannot be added: CI runs as
// root with iptables, so there this test always runs.
func needFirewall(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: TestDockerServiceFirewall needs root (or CAP_NET_ADMIN) to add the iptables rule; run it as root to test that service jobs cannot reach the host")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("SKIPPED: TestDockerServiceFirewall needs an iptables binary: " + err.Error())
	}
}

// Both holes the service firewall closes, shown open and then closed:
// a service job reaches a listener of the host's (bound to 0.0.0.0)
// through its bridge's gateway, and a container on the default bridge
// reaches the job while Docker's isolation is out of the way (as it is for
// a moment each time Docker creates a network: the test opens exactly
// that gap, for this job's bridge only, with ACCEPT rules in DOCKER-USER).
// EnsureServiceFirewall closes both while the host still reaches the job's
// port; ensuring twice adds each rule once; a flushed rule is put back by
// the next service job's start. The host's rules are left as found
// (leaveFirewallAsFound).
func TestDockerServiceFirewall(t *testing.T) {
	needFirewall(t)
	d := needDocker(t)
	ctx := context.Background()

	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	j, addr := startService(t, d)
	n, err := d.cli.NetworkInspect(ctx, serviceNetworkName(j.ID()), network.InspectOptions{})
	if err != nil || len(n.IPAM.Config) == 0 || n.IPAM.Config[0].Gateway == "" {
		t.Fatalf("service network's gateway: %+v, %v", n.IPAM, err)
	}
	hostAddr := net.JoinHostPort(n.IPAM.Config[0].Gateway, strconv.Itoa(port))

	leaveFirewallAsFound(t)
	bypassDockerIsolation(t, d, n.Options[bridgeName])

	// The holes this closes.
	if r := withoutRules(t, func() dialed { return dialFromContainer(t, d, j.ID(), hostAddr) }); r.Reply != "host\n" {
		t.Fatalf("without the rules the job did not reach the host's listener at %s (%+v): Docker may have closed moby/libnetwork#1151; revisit service_firewall.go", hostAddr, r)
	}
	if r := withoutRules(t, func() dialed { return dialOnDefaultBridge(t, d, addr.String()) }); r.Reply != "pong\n" {
		t.Fatalf("without the rules and with Docker's isolation out of the way, a container on the default bridge did not reach the job at %s: %+v", addr, r)
	}

	for _, rule := range ServiceFirewallRules { // (again, in case another test's daemon put one back)
		deleteRule(t, "iptables", rule)
	}
	got := EnsureServiceFirewall(ctx)
	if got[0].State != FirewallAdded || len(got[0].Rules) != len(ServiceFirewallRules) {
		t.Fatalf("ensure: %+v, want all %d rules added", got[0], len(ServiceFirewallRules))
	}
	for i, r := range got {
		if r.State == FirewallUnknown || r.State == FirewallMissing {
			t.Errorf("ensure %s: %+v", firewallTools[i], r)
		}
	}
	if again := EnsureServiceFirewall(ctx); again[0].State != FirewallPresent {
		t.Fatalf("second ensure: %+v, want present", again[0])
	}
	for _, rule := range ServiceFirewallRules {
		if c := countRule(t, "iptables", rule); c != 1 {
			t.Fatalf("%d copies of %q after ensuring twice", c, rule.Listed())
		}
	}

	if r := dialFromContainer(t, d, j.ID(), hostAddr); r.Reply != "" || r.Err == "" {
		t.Fatalf("with the rules the job still reached the host's listener at %s: %+v", hostAddr, r)
	}
	if r := dialOnDefaultBridge(t, d, addr.String()); r.Reply != "" || r.Err == "" {
		t.Fatalf("with the rules a container on the default bridge still reached the job at %s: %+v", addr, r)
	}
	// The host still reaches the job, and the listener still answers
	// the host: only the job's connections were refused.
	if got := dialFromHost(t, addr.String()); got != "pong\n" {
		t.Fatalf("service answered the host %q with the rules in place", got)
	}
	if got := dialFromHost(t, hostAddr); got != "host\n" {
		t.Fatalf("the host's own listener answered the host %q", got)
	}

	// A firewall reload that flushes a chain takes a rule away after the
	// daemon's start; the next service job's start puts it back, through
	// the guard the node sets.
	flushed := ServiceFirewallRules[1]
	deleteRule(t, "iptables", flushed)
	guarded := 0
	d.SetServiceGuard(func(ctx context.Context) { guarded++; EnsureServiceFirewall(ctx) })
	defer d.SetServiceGuard(nil)
	startService(t, d)
	if c := countRule(t, "iptables", flushed); guarded != 1 || c != 1 {
		t.Fatalf("after a service job's start with %q flushed: the guard ran %d time(s), %d copies of it", flushed.Listed(), guarded, c)
	}
}

// leaveFirewallAsFound puts the service firewall back as the test found
// it, whatever the test does and however it fails: a rule that was missing
// is removed (a stray copy would be harmless, as it names only glsvc+
// interfaces, but then the next run could not show the holes), and one
// that was there (a daemon's, as root, or the owner's) is there again.
func leaveFirewallAsFound(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, tool := range firewallTools {
		if checkRules(ctx, tool).State == FirewallSkipped {
			continue
		}
		for _, rule := range ServiceFirewallRules {
			rc, msg, err := iptables(ctx, tool, rule, "-C")
			if err != nil || (rc != 0 && rc != 1) {
				t.Fatalf("%s -C %q: %d %s %v", tool, rule.Listed(), rc, msg, err)
			}
			if rc == 0 { // there: put back if the test took it out
				t.Cleanup(func() {
					if countRule(t, tool, rule) == 0 {
						if rc, msg, err := iptables(context.Background(), tool, rule, "-I"); rc != 0 || err != nil {
							t.Errorf("put %s %q back: %d %s %v", tool, rule.Listed(), rc, msg, err)
						}
					}
				})
			} else { // missing: taken out again if the test added it
				t.Cleanup(func() { deleteRule(t, tool, rule) })
			}
		}
	}
}

// dialed is the probe's answer to a dial.
type dialed = struct{ Reply, Err string }

// withoutRules dials with the service firewall's IPv4 rules taken out.
// A daemon of another package's test, running at the same time as root,
// puts them back before each service job it starts (its guard): a dial
// refused while a rule came back meanwhile proves nothing, so it is tried
// again, up to three times.
func withoutRules(t *testing.T, dial func() dialed) dialed {
	t.Helper()
	for try := 1; ; try++ {
		for _, rule := range ServiceFirewallRules {
			deleteRule(t, "iptables", rule)
		}
		r := dial()
		back := 0
		for _, rule := range ServiceFirewallRules {
			back += countRule(t, "iptables", rule)
		}
		if r.Reply != "" || back == 0 || try == 3 {
			return r
		}
		t.Logf("%d rule(s) put back during the dial (another test's daemon?): trying again", back)
	}
}

// deleteRule removes every copy of rule from tool's family.
func deleteRule(t *testing.T, tool string, rule FirewallRule) {
	t.Helper()
	for countRule(t, tool, rule) > 0 {
		if rc, msg, err := iptables(context.Background(), tool, rule, "-D"); rc != 0 || err != nil {
			t.Fatalf("%s -D %q: %d %s %v", tool, rule.Listed(), rc, msg, err)
		}
	}
}

// bypassDockerIsolation accepts forwarding between the default bridge
// and bridge in DOCKER-USER, ahead of Docker's isolation chains: what
// the filter table does for every bridge in the moment Docker deletes and
// re-inserts its jump to DOCKER-ISOLATION-STAGE-1, made to last for one
// bridge. Removed when the test ends.
func bypassDockerIsolation(t *testing.T, d *Docker, bridge string) {
	t.Helper()
	def, err := d.cli.NetworkInspect(context.Background(), "bridge", network.InspectOptions{})
	if err != nil || def.Options[bridgeName] == "" || bridge == "" {
		t.Fatalf("the default bridge's interface (%v) and the job's (%q): %v", def.Options, bridge, err)
	}
	for _, dir := range [][2]string{{def.Options[bridgeName], bridge}, {bridge, def.Options[bridgeName]}} {
		rule := []string{"DOCKER-USER", "-i", dir[0], "-o", dir[1], "-j", "ACCEPT"}
		if out, err := exec.Command("iptables", append([]string{"-w", "5", "-I"}, rule...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables -I %v: %v: %s", rule, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("iptables", append([]string{"-w", "5", "-D"}, rule...)...).CombinedOutput(); err != nil {
				t.Errorf("iptables -D %v: %v: %s", rule, err, out)
			}
		})
	}
}

// dialFromContainer runs the probe's dial inside the job's running
// container (its network namespace): the job itself connecting.
func dialFromContainer(t *testing.T, d *Docker, jobID, addr string) (r dialed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := d.cli.ContainerExecCreate(ctx, containerName(jobID), container.ExecOptions{
		Cmd: []string{"/probe", "dial", addr}, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	att, err := d.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, att.Reader); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("dial output %q (stderr %q): %v", out.Bytes(), errOut.Bytes(), err)
	}
	t.Logf("job %s dialing %s: %+v", jobID, addr, r)
	return r
}

// countRule counts rule's copies in its chain of tool's family.
func countRule(t *testing.T, tool string, rule FirewallRule) int {
	t.Helper()
	out, err := exec.Command(tool, "-w", "5", "-t", rule.Table, "-S", rule.Chain()).CombinedOutput()
	if err != nil {
		t.Fatalf("%s -t %s -S %s: %v: %s", tool, rule.Table, rule.Chain(), err, out)
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) == rule.Listed() {
			n++
		}
	}
	return n
}

// fakeIPTables answers -C from a set of present rules per tool, records
// -I, and fails with answer when it is set.
type fakeIPTables struct {
	present map[string]bool // tool + " " + args
	added   []string
	answer  func(tool, op string) (int, string, error)
}

func (f *fakeIPTables) run(_ context.Context, tool string, args ...string) (int, string, error) {
	op, key := args[2], tool+" "+strings.Join(args[3:], " ")
	if args[2] == "-t" { // -w 5 -t TABLE OP RULE...
		op, key = args[4], tool+" "+args[3]+" "+strings.Join(args[5:], " ")
	}
	if f.answer != nil {
		if rc, msg, err := f.answer(tool, op); rc != 0 || err != nil {
			return rc, msg, err
		}
	}
	switch op {
	case "-C":
		if f.present[key] {
			return 0, "", nil
		}
		return 1, "iptables: Bad rule (does a matching rule exist in that chain?).", nil
	case "-I":
		f.present[key] = true
		f.added = append(f.added, key)
		return 0, "", nil
	}
	return 2, "unexpected " + op, nil
}

func withFakeIPTables(t *testing.T, f *fakeIPTables) {
	old := runIPTables
	runIPTables = f.run
	t.Cleanup(func() { runIPTables = old })
}

// Ensure inserts only the rules that are missing, per family, reports
// which, and says why where it cannot check or add them.
func TestEnsureServiceFirewallAddsOnlyWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	key := func(tool string, r FirewallRule) string {
		if r.Table == "filter" {
			return tool + " " + strings.Join(r.Rule, " ")
		}
		return tool + " " + r.Table + " " + strings.Join(r.Rule, " ")
	}
	f := &fakeIPTables{present: map[string]bool{key("iptables", ServiceFirewallRules[0]): true}}
	withFakeIPTables(t, f)
	before := CheckServiceFirewall(ctx)
	if before[0].State != FirewallMissing || len(before[0].Rules) != len(ServiceFirewallRules)-1 || before[0].Rules[0].Table != "mangle" {
		t.Fatalf("iptables with the INPUT rule only: %+v", before[0])
	}
	if c := before[0].Command(); strings.Contains(c, "INPUT") || !strings.Contains(c, "sudo iptables -t mangle -I FORWARD -o glsvc+ -j DROP") {
		t.Fatalf("the command for the missing rules: %q", c)
	}
	got := EnsureServiceFirewall(ctx)
	if got[0].State != FirewallAdded || len(got[0].Rules) != 2 || got[1].State != FirewallAdded || len(got[1].Rules) != 3 {
		t.Fatalf("ensure: %+v", got)
	}
	if len(f.added) != 5 {
		t.Fatalf("inserted %d rules, want 2 for iptables and 3 for ip6tables: %v", len(f.added), f.added)
	}
	if again := EnsureServiceFirewall(ctx); again[0].State != FirewallPresent || again[1].State != FirewallPresent || len(f.added) != 5 {
		t.Fatalf("second ensure: %+v, %d inserts", again, len(f.added))
	}

	// Checking is allowed and inserting is not (a capability dropped
	// after the check, or a read-only netns): the rules stay missing,
	// with why.
	denied := "iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)"
	f = &fakeIPTables{present: map[string]bool{}, answer: func(tool, op string) (int, string, error) {
		if op == "-I" {
			return 4, denied, nil
		}
		return 0, "", nil
	}}
	withFakeIPTables(t, f)
	got = EnsureServiceFirewall(ctx)
	if got[0].State != FirewallMissing || len(got[0].Rules) != len(ServiceFirewallRules) || !strings.Contains(got[0].Detail, "permission denied") || len(f.added) != 0 {
		t.Fatalf("inserting refused: %+v, inserted %v", got[0], f.added)
	}

	f = &fakeIPTables{present: map[string]bool{}, answer: func(tool, _ string) (int, string, error) {
		if tool == "ip6tables" {
			return -1, "", exec.ErrNotFound
		}
		return 4, denied, nil
	}}
	withFakeIPTables(t, f)
	got = EnsureServiceFirewall(ctx)
	if got[0].State != FirewallUnknown || !strings.Contains(got[0].Detail, "permission denied") || got[1].State != FirewallSkipped {
		t.Fatalf("not root, no ip6tables: %+v", got)
	}
	if c := got[0].CheckCommand(); strings.Count(c, "sudo iptables ") != len(ServiceFirewallRules) || !strings.Contains(c, "-t mangle -C FORWARD") {
		t.Fatalf("the check commands when nothing could be checked: %q", c)
	}
}
