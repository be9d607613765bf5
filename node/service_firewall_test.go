package node

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/repo"
)

// The daemon's start inserts the service firewall rules when it runs as
// root with Docker and iptables, each once however often it starts, and
// leaves them alone with provider.service_firewall = "off".
//
// iptables rules belong to a network namespace, and other packages' tests
// start daemons that insert these rules in the host's namespace while this
// one runs (a clean-clone CI run once saw a rule appear between "remove"
// and "check"). So the test runs again as a child process in a network
// namespace of its own (unshare --net), where no other daemon can touch
// its rules, and the host's rules are never changed.
func TestDaemonEnsuresServiceFirewall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: TestDaemonEnsuresServiceFirewall needs root to add the iptables rules")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("SKIPPED: TestDaemonEnsuresServiceFirewall needs an iptables binary: " + err.Error())
	}
	if os.Getenv(firewallNetnsEnv) != "1" {
		inOwnNetns(t)
		return
	}
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip link set lo up in the test's own network namespace: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if d, err := executor.NewDocker(ctx); err != nil {
		t.Fatalf("this test requires a reachable Docker engine (the rules are ensured with the Docker executor): %v", err)
	} else {
		d.Close()
	}
	run := func(tool string, args ...string) (string, error) {
		out, err := exec.Command(tool, append([]string{"-w", "5"}, args...)...).CombinedOutput()
		if err != nil {
			return "", &exec.Error{Name: strings.TrimSpace(string(out)), Err: err}
		}
		return string(out), nil
	}
	present := func() bool { return executor.CheckServiceFirewall(ctx)[0].State == executor.FirewallPresent }
	absent := func() bool {
		r := executor.CheckServiceFirewall(ctx)[0]
		return r.State == executor.FirewallMissing && len(r.Rules) == len(executor.ServiceFirewallRules)
	}
	// remove takes every copy of rule out of tool's family.
	remove := func(tool string, rule executor.FirewallRule) {
		for {
			if _, err := run(tool, rule.Args("-C")...); err != nil {
				return
			}
			if _, err := run(tool, rule.Args("-D")...); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A fresh namespace starts with none of the rules; take them out
	// anyway, so that the check below could not pass on a namespace
	// that somehow had them.
	for _, r := range executor.ServiceFirewallRules {
		remove("iptables", r)
	}
	startNodeWith(t, ctx, func(c *repo.Config) { c.Provider.ServiceFirewall = "off" }, Options{})
	if !absent() {
		t.Fatal("a daemon with provider.service_firewall = off inserted a rule")
	}
	var logs lockedBuffer
	startNodeWith(t, ctx, func(*repo.Config) {}, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !present() {
		t.Fatalf("the daemon did not insert the rules; its log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "inserted the iptables rules") || !strings.Contains(logs.String(), "-t mangle -I FORWARD") {
		t.Errorf("the daemon did not log the rules it inserted:\n%s", logs.String())
	}
	startNodeWith(t, ctx, func(*repo.Config) {}, Options{})
	for _, r := range executor.ServiceFirewallRules {
		out, err := run("iptables", "-t", r.Table, "-S", r.Chain())
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out, r.Listed()+"\n"); n != 1 {
			t.Fatalf("%d copies of %q after two daemons started:\n%s", n, r.Listed(), out)
		}
	}
}

const firewallNetnsEnv = "GLEANER_TEST_FIREWALL_NETNS"

// inOwnNetns runs t's test again in a new network namespace and fails t
// with the child's output if the child did not pass.
func inOwnNetns(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("%s needs unshare (util-linux) to run in a network namespace of its own: %v", t.Name(), err)
	}
	cmd := exec.Command("unshare", "--net", os.Args[0],
		"-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), firewallNetnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s in its own network namespace: %v\n%s", t.Name(), err, out)
	}
	t.Logf("passed in its own network namespace:\n%s", out)
}
