package node

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/repo"
)

// Doctor's check of the rules that fence service jobs in; the daemon
// makes sure of them at its start (providing.EnsureServiceFirewall).

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
		c.Detail = providing.WhyOpen(missingRules) + ": firewall rules on glsvc+ are missing"
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
