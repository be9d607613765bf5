package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Two holes that Docker's internal networks leave, closed by the service
// firewall: three rules on the glsvc+ bridges (service_net.go names every
// service bridge so). The daemon adds them when it may (root or
// CAP_NET_ADMIN, and an iptables binary); when it may not, the owner does,
// and doctor says which. They name only glsvc+ interfaces, so they are
// harmless on a host with no service job and are never removed.
//
//   - A job can connect to the host's own listeners through its bridge's
//     gateway (moby/libnetwork#1151): packets for the host are delivered,
//     not forwarded. One INPUT rule drops only new connections that arrive
//     from a job, so the replies to the daemon's own connections into the
//     container (ESTABLISHED) still pass.
//   - Docker's isolation of an internal network is its filter FORWARD
//     chain's jump to DOCKER-ISOLATION-STAGE-1, and each time any network
//     is created Docker deletes that jump and inserts it again (two
//     iptables calls; seen on 20.10, and in CI as a container on the
//     default bridge reaching a service job). In between, docker0's and
//     every other bridge's ACCEPT rules forward a connection into the
//     job's network. Two rules in the mangle table's FORWARD chain, which
//     Docker never touches and the kernel walks before the filter table's,
//     drop everything forwarded into or out of a service bridge. Nothing
//     legitimate is forwarded there: the daemon's connections to a job are
//     the host's own (OUTPUT), and a job has no egress.

// FirewallRule is one rule of the service firewall.
type FirewallRule struct {
	Table string   // iptables table: "filter" or "mangle"
	Rule  []string // the chain, then the matches and the target
	Why   string   // what is open without it, for doctor and the log
}

// ServiceFirewallRules are the rules, in the order they are checked.
var ServiceFirewallRules = []FirewallRule{
	{"filter", []string{"INPUT", "-i", serviceBridgePrefix + "+", "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"},
		"service jobs can connect to this host's own listeners"},
	{"mangle", []string{"FORWARD", "-o", serviceBridgePrefix + "+", "-j", "DROP"},
		"other containers can reach service jobs whenever Docker rearranges its rules"},
	{"mangle", []string{"FORWARD", "-i", serviceBridgePrefix + "+", "-j", "DROP"},
		"service jobs can reach other containers whenever Docker rearranges its rules"},
}

// Args is the rule's iptables arguments from op (-C, -I, -D).
func (r FirewallRule) Args(op string) []string {
	out := []string{op}
	if r.Table != "filter" {
		out = []string{"-t", r.Table, op}
	}
	return append(out, r.Rule...)
}

// Chain is the rule's chain.
func (r FirewallRule) Chain() string { return r.Rule[0] }

// Listed is the rule as `iptables -t TABLE -S CHAIN` prints it.
func (r FirewallRule) Listed() string { return "-A " + strings.Join(r.Rule, " ") }

// Command is what an owner runs, as root, with op on tool.
func (r FirewallRule) Command(tool, op string) string {
	return "sudo " + tool + " " + strings.Join(r.Args(op), " ")
}

const serviceBridgePrefix = "glsvc"

// FirewallState says where one address family's rules stand.
type FirewallState int

const (
	FirewallUnknown FirewallState = iota // could not be checked; Detail says why
	FirewallMissing                      // Rules are missing
	FirewallPresent                      // every rule is in place
	FirewallAdded                        // EnsureServiceFirewall inserted Rules just now; the rest were there
	FirewallSkipped                      // nothing to do here (no ip6tables); Detail says why
)

// FirewallReport is one family's outcome.
type FirewallReport struct {
	Tool   string // iptables or ip6tables
	State  FirewallState
	Detail string
	// Rules are the ones the state is about: those missing (Missing),
	// inserted (Added) or not known (Unknown); nil otherwise.
	Rules []FirewallRule
}

// Command is what the owner runs to add the report's rules by hand.
func (r FirewallReport) Command() string { return r.commands("-I") }

// CheckCommand is how the owner checks for them by hand.
func (r FirewallReport) CheckCommand() string { return r.commands("-C") }

func (r FirewallReport) commands(op string) string {
	out := make([]string, len(r.Rules))
	for i, rule := range r.Rules {
		out[i] = rule.Command(r.Tool, op)
	}
	return strings.Join(out, "; ")
}

// firewallTools are the families, IPv4 first. IPv6 is ensured too even
// though service networks are created without IPv6: a container's
// interface may still carry a link-local address, and the rules cost
// nothing where no IPv6 traffic comes.
var firewallTools = []string{"iptables", "ip6tables"}

// runIPTables runs one iptables command; a variable so that tests can
// fake the binary's answers.
var runIPTables = func(ctx context.Context, tool string, args ...string) (int, string, error) {
	path, err := lookTool(tool)
	if err != nil {
		return -1, "", err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), strings.TrimSpace(out.String()), nil
	}
	return 0, strings.TrimSpace(out.String()), err
}

// lookTool finds tool on PATH or in the sbin directories, which a
// non-root user's PATH often lacks (Debian).
func lookTool(tool string) (string, error) {
	path, err := exec.LookPath(tool)
	if err == nil {
		return path, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if p, e := exec.LookPath(filepath.Join(dir, tool)); e == nil {
			return p, nil
		}
	}
	return "", err
}

// CheckServiceFirewall reports, per family, whether the rules are in
// place, changing nothing.
func CheckServiceFirewall(ctx context.Context) []FirewallReport {
	out := make([]FirewallReport, len(firewallTools))
	for i, tool := range firewallTools {
		out[i] = checkRules(ctx, tool)
	}
	return out
}

// EnsureServiceFirewall inserts the rules that are missing: idempotent
// (checked with -C first), so a restart adds no second copy. It never
// fails: a family it cannot fix is reported Missing or Unknown, with why.
func EnsureServiceFirewall(ctx context.Context) []FirewallReport {
	out := CheckServiceFirewall(ctx)
	for i, r := range out {
		if r.State != FirewallMissing {
			continue
		}
		failed := insertRules(ctx, r.Tool, r.Rules)
		// Checked again rather than trusted: the rules that matter are
		// the ones -C finds.
		again := checkRules(ctx, r.Tool)
		switch {
		case again.State == FirewallPresent:
			out[i].State, out[i].Detail = FirewallAdded, "inserted"
		case again.State == FirewallMissing && failed != "":
			out[i].Rules, out[i].Detail = again.Rules, failed
		default:
			out[i] = again
		}
	}
	return out
}

// insertRules inserts rules into tool's family and says why it stopped,
// at the first failure (the rest would fail alike), or "".
func insertRules(ctx context.Context, tool string, rules []FirewallRule) string {
	for _, rule := range rules {
		rc, msg, err := iptables(ctx, tool, rule, "-I")
		switch {
		case err != nil:
			return err.Error()
		case rc != 0 && isPermission(rc, msg):
			return tool + ": permission denied (the daemon needs root or CAP_NET_ADMIN to add the rules)"
		case rc != 0:
			return fmt.Sprintf("%s %s exited %d: %s", tool, strings.Join(rule.Args("-I"), " "), rc, msg)
		}
	}
	return ""
}

func iptables(ctx context.Context, tool string, rule FirewallRule, op string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// -w: wait for the xtables lock (Docker takes it too) rather than fail.
	return runIPTables(ctx, tool, append([]string{"-w", "5"}, rule.Args(op)...)...)
}

// checkRules checks each rule of tool's family: Present when all are
// there, Missing with the ones that are not, or why it could not tell.
func checkRules(ctx context.Context, tool string) FirewallReport {
	r := FirewallReport{Tool: tool}
	for _, rule := range ServiceFirewallRules {
		rc, msg, err := iptables(ctx, tool, rule, "-C")
		switch {
		case errors.Is(err, exec.ErrNotFound) && tool == "ip6tables":
			return FirewallReport{Tool: tool, State: FirewallSkipped, Detail: "no ip6tables binary: IPv6 not checked"}
		case errors.Is(err, exec.ErrNotFound):
			return FirewallReport{Tool: tool, Detail: "no iptables binary (PATH, /usr/sbin, /sbin)", Rules: ServiceFirewallRules}
		case err != nil:
			return FirewallReport{Tool: tool, Detail: err.Error(), Rules: ServiceFirewallRules}
		case rc == 0:
		case isPermission(rc, msg):
			return FirewallReport{Tool: tool, Rules: ServiceFirewallRules,
				Detail: tool + ": permission denied (checking and adding the rules need root or CAP_NET_ADMIN)"}
		case rc == 1 && strings.Contains(msg, "matching rule"):
			r.Rules = append(r.Rules, rule)
		default:
			return FirewallReport{Tool: tool, Rules: ServiceFirewallRules,
				Detail: fmt.Sprintf("%s %s exited %d: %s", tool, strings.Join(rule.Args("-C"), " "), rc, msg)}
		}
	}
	if len(r.Rules) > 0 {
		r.State, r.Detail = FirewallMissing, "missing"
	} else {
		r.State, r.Detail = FirewallPresent, "present"
	}
	return r
}

// isPermission: iptables exits 4 ("Permission denied (you must be root)")
// or, under some builds, 3 with the same text.
func isPermission(rc int, msg string) bool {
	return rc == 4 || strings.Contains(msg, "Permission denied") || strings.Contains(msg, "you must be root")
}

// WhyOpen says what the missing rules leave open, each once.
func WhyOpen(rules []FirewallRule) string {
	var out []string
	for _, r := range rules {
		if !slices.Contains(out, r.Why) {
			out = append(out, r.Why)
		}
	}
	return strings.Join(out, "; ")
}
