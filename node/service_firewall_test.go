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
// leaves them alone with provider.service_firewall = "off". The host's
// rules are left as found (see TestDockerServiceFirewall in
// node/executor for why and how).
func TestDaemonEnsuresServiceFirewall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: TestDaemonEnsuresServiceFirewall needs root to add the iptables rules")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("SKIPPED: TestDaemonEnsuresServiceFirewall needs an iptables binary: " + err.Error())
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
	before := executor.CheckServiceFirewall(ctx)
	for _, r := range executor.ServiceFirewallRules {
		remove("iptables", r)
	}
	t.Cleanup(func() {
		// Every rule back, then the ones that were missing out again.
		executor.EnsureServiceFirewall(context.Background())
		for _, r := range before {
			if r.State != executor.FirewallMissing {
				continue
			}
			for _, rule := range r.Rules {
				remove(r.Tool, rule)
			}
		}
	})

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
