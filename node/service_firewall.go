package node

import (
	"context"

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
			n.log.Warn(executor.WhyOpen(r.Rules)+": the daemon could not add the firewall rules; run this as root (or set provider.service_firewall = \"off\" if your firewall already refuses that traffic)",
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
