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

// A service job can reach a listener of the host's (bound to 0.0.0.0)
// through its bridge's gateway until EnsureServiceFirewall adds the rule;
// then it cannot, while the host still reaches the job's port. Ensuring
// twice adds one rule.
//
// The host is left as found. A rule that was missing is removed again (a
// stray copy would be harmless, as it names only glsvc+ interfaces, but
// then the next run could not show the hole). A rule that was there (a
// daemon's, as root, or the owner's) is taken out for the few seconds
// that show the hole, and put back by EnsureServiceFirewall itself: so the
// test always shows both halves, whatever ran before it.
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

	before := CheckServiceFirewall(ctx)
	if before[0].State == FirewallUnknown {
		t.Fatalf("iptables -C as root: %+v", before[0])
	}
	// Cleanups first, so that a failure below still leaves the host as
	// found: a family whose rule was missing loses it, one whose rule was
	// there has it again.
	for i, tool := range firewallTools {
		switch before[i].State {
		case FirewallMissing:
			t.Cleanup(func() {
				for checkRule(context.Background(), tool).State == FirewallPresent {
					if rc, msg, err := iptables(context.Background(), tool, "-D"); rc != 0 || err != nil {
						t.Errorf("remove the %s rule this test added: %d %s %v", tool, rc, msg, err)
						return
					}
				}
			})
		case FirewallPresent:
			t.Cleanup(func() {
				if r := EnsureServiceFirewall(context.Background()); r[i].State != FirewallPresent && r[i].State != FirewallAdded {
					t.Errorf("put the %s rule back: %+v", tool, r[i])
				}
			})
		}
	}
	if before[0].State == FirewallPresent {
		// A daemon (or an earlier test) added it: taken out for a few
		// seconds, so that the hole is shown and EnsureServiceFirewall
		// puts it back.
		if rc, msg, err := iptables(ctx, "iptables", "-D"); rc != 0 || err != nil {
			t.Fatalf("take the rule out: %d %s %v", rc, msg, err)
		}
		t.Log("the rule was in place: taken out to show the hole, put back below")
	}
	// The hole this closes: without the rule, the job reaches the host.
	if r := dialFromContainer(t, d, j.ID(), hostAddr); r.Reply != "host\n" {
		t.Fatalf("without the rule the job did not reach the host's listener at %s (%+v): Docker may have closed moby/libnetwork#1151; revisit service_firewall.go", hostAddr, r)
	}

	got := EnsureServiceFirewall(ctx)
	if got[0].State != FirewallAdded {
		t.Fatalf("ensure: %+v, want added", got[0])
	}
	for i, r := range got {
		if r.State == FirewallUnknown || r.State == FirewallMissing {
			t.Errorf("ensure %s: %+v", firewallTools[i], r)
		}
	}
	if again := EnsureServiceFirewall(ctx); again[0].State != FirewallPresent {
		t.Fatalf("second ensure: %+v, want present", again[0])
	}
	if c := countRules(t, "iptables"); c != 1 {
		t.Fatalf("%d copies of the rule in INPUT after ensuring twice", c)
	}

	if r := dialFromContainer(t, d, j.ID(), hostAddr); r.Reply != "" || r.Err == "" {
		t.Fatalf("with the rule the job still reached the host's listener at %s: %+v", hostAddr, r)
	}
	// The host still reaches the job, and the listener still answers
	// the host: only the job's connections were refused.
	if got := dialFromHost(t, addr.String()); got != "pong\n" {
		t.Fatalf("service answered the host %q with the rule in place", got)
	}
	if got := dialFromHost(t, hostAddr); got != "host\n" {
		t.Fatalf("the host's own listener answered the host %q", got)
	}

	// A firewall reload that flushes INPUT takes the rule away after the
	// daemon's start; the next service job's start puts it back, through
	// the guard the node sets.
	if rc, msg, err := iptables(ctx, "iptables", "-D"); rc != 0 || err != nil {
		t.Fatalf("take the rule out: %d %s %v", rc, msg, err)
	}
	guarded := 0
	d.SetServiceGuard(func(ctx context.Context) { guarded++; EnsureServiceFirewall(ctx) })
	defer d.SetServiceGuard(nil)
	startService(t, d)
	if c := countRules(t, "iptables"); guarded != 1 || c != 1 {
		t.Fatalf("after a service job's start with the rule flushed: the guard ran %d time(s), %d copies of the rule", guarded, c)
	}
}

// dialFromContainer runs the probe's dial inside the job's running
// container (its network namespace): the job itself connecting.
func dialFromContainer(t *testing.T, d *Docker, jobID, addr string) (r struct{ Reply, Err string }) {
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

func countRules(t *testing.T, tool string) int {
	t.Helper()
	out, err := exec.Command(tool, "-w", "5", "-S", "INPUT").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -S INPUT: %v: %s", tool, err, out)
	}
	want := "-A " + strings.Join(ServiceFirewallRule, " ")
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) == want {
			n++
		}
	}
	return n
}
