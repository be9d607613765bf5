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
)

// The daemon's start inserts the service firewall rule when it runs as
// root with Docker and iptables, once however often it starts, and
// leaves it alone with provider.service_firewall = "off". The host's
// rule is left as found (see TestDockerServiceFirewall in
// node/executor for why and how).
func TestDaemonEnsuresServiceFirewall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: TestDaemonEnsuresServiceFirewall needs root to add the iptables rule")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("SKIPPED: TestDaemonEnsuresServiceFirewall needs an iptables binary: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if d, err := executor.NewDocker(ctx); err != nil {
		t.Fatalf("this test requires a reachable Docker engine (the rule is ensured with the Docker executor): %v", err)
	} else {
		d.Close()
	}
	rule := func(tool, op string) error {
		out, err := exec.Command(tool, append([]string{"-w", "5", op}, executor.ServiceFirewallRule...)...).CombinedOutput()
		if err != nil {
			return &exec.Error{Name: strings.TrimSpace(string(out)), Err: err}
		}
		return nil
	}
	present := func() bool { return rule("iptables", "-C") == nil }
	before := executor.CheckServiceFirewall(ctx)
	if before[0].State == executor.FirewallPresent {
		if err := rule("iptables", "-D"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, r := range before {
			switch r.State {
			case executor.FirewallPresent:
				executor.EnsureServiceFirewall(context.Background())
			case executor.FirewallMissing:
				for rule(r.Tool, "-C") == nil && rule(r.Tool, "-D") == nil {
				}
			}
		}
	})

	startNodeWith(t, ctx, func(c *Config) { c.Provider.ServiceFirewall = "off" }, Options{})
	if present() {
		t.Fatal("a daemon with provider.service_firewall = off inserted the rule")
	}
	var logs lockedBuffer
	startNodeWith(t, ctx, func(*Config) {}, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !present() {
		t.Fatalf("the daemon did not insert the rule; its log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "inserted the iptables rule") {
		t.Errorf("the daemon did not log the rule it inserted:\n%s", logs.String())
	}
	startNodeWith(t, ctx, func(*Config) {}, Options{})
	out, err := exec.Command("iptables", "-w", "5", "-S", "INPUT").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "-A "+strings.Join(executor.ServiceFirewallRule, " ")+"\n"); n != 1 {
		t.Fatalf("%d copies of the rule after two daemons started:\n%s", n, out)
	}
}
