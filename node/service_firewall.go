package node

import (
	"context"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/repo"
)

// The rules that fence service jobs in (executor/service_firewall.go):
// off the host's own listeners, and out of reach of other containers while
// Docker rearranges its own rules. The daemon makes sure of them at start,
// before it can take a service job, and doctor checks them. Neither ever
// fails for them: a daemon without the permission still runs batch jobs,
// and says in its log what the owner must run.

// ensureServiceFirewall is called once Docker is the executor.
func (n *Node) ensureServiceFirewall(ctx context.Context) {
	if n.cfg.Provider.ServiceFirewall == repo.ServiceFirewallOff {
		n.log.Info("provider.service_firewall = off: the owner fences service jobs in",
			"rules", executor.FirewallReport{Tool: "iptables", Rules: executor.ServiceFirewallRules}.Command())
		return
	}
	for _, r := range executor.EnsureServiceFirewall(ctx) {
		switch r.State {
		case executor.FirewallAdded:
			n.log.Info("inserted the "+r.Tool+" rules that fence service jobs in", "command", r.Command())
		case executor.FirewallPresent:
			n.log.Debug("service firewall rule present", "tool", r.Tool)
		case executor.FirewallSkipped:
			n.log.Info("service firewall rule skipped", "tool", r.Tool, "why", r.Detail)
		default:
			n.log.Warn(whyOpen(r.Rules)+": the daemon could not add the firewall rules; run this as root (or set provider.service_firewall = \"off\" if your firewall already refuses that traffic)",
				"run", r.Command(), "why", r.Detail)
		}
	}
}

// recheckServiceFirewall runs before each service job (the executor's
// service guard): a -C per rule and family, milliseconds, and a rule put
// back if a firewall reload flushed it since the start. Only that is
// logged: what the daemon cannot fix was said at its start.
func (n *Node) recheckServiceFirewall(ctx context.Context) {
	for _, r := range executor.EnsureServiceFirewall(ctx) {
		if r.State == executor.FirewallAdded {
			n.log.Warn("re-inserted the "+r.Tool+" rules that fence service jobs in: the host's firewall rules were flushed since this daemon started", "command", r.Command())
		}
	}
}

// serviceFirewallCheck is doctor's "service firewall" check. checkRules
// is executor.CheckServiceFirewall but for tests.
func serviceFirewallCheck(ctx context.Context, dir string, checkRules func(context.Context) []executor.FirewallReport) Check {
	c := Check{Name: "service firewall"}
	off := false
	if cfg, err := repo.LoadConfig(filepath.Join(dir, ConfigFile)); err == nil {
		off = cfg.Provider.ServiceFirewall == repo.ServiceFirewallOff
	}
	var good, fixes, unknown []string
	var missingRules []executor.FirewallRule
	for _, r := range checkRules(ctx) {
		switch r.State {
		case executor.FirewallPresent, executor.FirewallAdded:
			good = append(good, r.Tool+" rules present")
		case executor.FirewallSkipped:
			good = append(good, r.Detail)
		case executor.FirewallMissing:
			missingRules = append(missingRules, r.Rules...)
			fixes = append(fixes, r.Command())
		default:
			unknown = append(unknown, r.Detail)
			fixes = append(fixes, "check as root: "+r.CheckCommand()+"; if it is missing: "+r.Command())
		}
	}
	c.Fix = strings.Join(fixes, "; ")
	switch {
	case len(missingRules) > 0:
		c.Status = StatusWarn
		c.Detail = whyOpen(missingRules) + ": firewall rules on glsvc+ are missing"
		if !off {
			c.Detail += " (a daemon running as root adds them at start: none has, or the rules were flushed since)"
		} else {
			c.Detail += " (provider.service_firewall = off: add them, or refuse that traffic in your own firewall)"
		}
	case len(unknown) > 0:
		c.Status = StatusSkip
		c.Detail = "skipped: " + strings.Join(unknown, "; ")
		if off {
			c.Detail += "; provider.service_firewall = off: your own firewall must refuse new connections from glsvc+ and forwarding to or from it"
		}
	default:
		c.Status, c.Detail, c.Fix = StatusPass, strings.Join(good, "; "), ""
	}
	return c
}

// whyOpen says what the missing rules leave open, each once.
func whyOpen(rules []executor.FirewallRule) string {
	var out []string
	for _, r := range rules {
		if !slices.Contains(out, r.Why) {
			out = append(out, r.Why)
		}
	}
	return strings.Join(out, "; ")
}
