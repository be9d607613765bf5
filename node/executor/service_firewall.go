package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Docker's internal networks do not stop a service job from connecting to
// the host's own listeners through its bridge's gateway
// (moby/libnetwork#1151, service_net.go). One INPUT rule on the glsvc+
// bridges refuses that: it drops only new connections that arrive from a
// job, so the replies to the daemon's own connections into the container
// (ESTABLISHED) still pass. The daemon adds it when it may (root or
// CAP_NET_ADMIN, and an iptables binary); when it may not, the owner does,
// and doctor says which. The rule names only glsvc+ interfaces, so it is
// harmless on a host with no service job and is never removed.

// ServiceFirewallRule is the rule's arguments after the chain operation
// (-C, -I, -D).
var ServiceFirewallRule = []string{"INPUT", "-i", serviceBridgePrefix + "+", "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"}

const serviceBridgePrefix = "glsvc"

// FirewallState says where one address family's rule stands.
type FirewallState int

const (
	FirewallUnknown FirewallState = iota // could not be checked; Detail says why
	FirewallMissing
	FirewallPresent
	FirewallAdded   // EnsureServiceFirewall inserted it just now
	FirewallSkipped // nothing to do here (no ip6tables); Detail says why
)

// FirewallReport is one family's outcome.
type FirewallReport struct {
	Tool   string // iptables or ip6tables
	State  FirewallState
	Detail string
}

// Command is what the owner runs to add the rule by hand.
func (r FirewallReport) Command() string {
	return "sudo " + r.Tool + " -I " + strings.Join(ServiceFirewallRule, " ")
}

// CheckCommand is how the owner checks for it by hand.
func (r FirewallReport) CheckCommand() string {
	return "sudo " + r.Tool + " -C " + strings.Join(ServiceFirewallRule, " ")
}

// firewallTools are the families, IPv4 first. IPv6 is ensured too even
// though service networks are created without IPv6: a container's
// interface may still carry a link-local address, and the rule costs
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

// CheckServiceFirewall reports, per family, whether the rule is in place,
// changing nothing.
func CheckServiceFirewall(ctx context.Context) []FirewallReport {
	out := make([]FirewallReport, len(firewallTools))
	for i, tool := range firewallTools {
		out[i] = checkRule(ctx, tool)
	}
	return out
}

// EnsureServiceFirewall inserts the rule where it is missing: idempotent
// (checked with -C first), so a restart adds no second copy. It never
// fails: a family it cannot fix is reported Missing or Unknown, with why.
func EnsureServiceFirewall(ctx context.Context) []FirewallReport {
	out := CheckServiceFirewall(ctx)
	for i, r := range out {
		if r.State != FirewallMissing {
			continue
		}
		rc, msg, err := iptables(ctx, r.Tool, "-I")
		switch {
		case err != nil:
			out[i].Detail = err.Error()
		case rc != 0:
			out[i].Detail = fmt.Sprintf("%s -I exited %d: %s", r.Tool, rc, msg)
			if isPermission(rc, msg) {
				out[i].Detail = r.Tool + ": permission denied (the daemon needs root or CAP_NET_ADMIN to add it)"
			}
		default:
			// Checked again rather than trusted: the rule that matters is
			// the one -C finds.
			if again := checkRule(ctx, r.Tool); again.State == FirewallPresent {
				out[i].State, out[i].Detail = FirewallAdded, "inserted"
			} else {
				out[i] = again
			}
		}
	}
	return out
}

func iptables(ctx context.Context, tool, op string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// -w: wait for the xtables lock (Docker takes it too) rather than fail.
	return runIPTables(ctx, tool, append([]string{"-w", "5", op}, ServiceFirewallRule...)...)
}

func checkRule(ctx context.Context, tool string) FirewallReport {
	r := FirewallReport{Tool: tool}
	rc, msg, err := iptables(ctx, tool, "-C")
	switch {
	case errors.Is(err, exec.ErrNotFound) && tool == "ip6tables":
		r.State, r.Detail = FirewallSkipped, "no ip6tables binary: IPv6 not checked"
	case errors.Is(err, exec.ErrNotFound):
		r.Detail = "no iptables binary (PATH, /usr/sbin, /sbin)"
	case err != nil:
		r.Detail = err.Error()
	case rc == 0:
		r.State, r.Detail = FirewallPresent, "present"
	case isPermission(rc, msg):
		r.Detail = tool + ": permission denied (checking and adding the rule need root or CAP_NET_ADMIN)"
	case rc == 1 && strings.Contains(msg, "matching rule"):
		r.State, r.Detail = FirewallMissing, "missing"
	default:
		r.Detail = fmt.Sprintf("%s -C exited %d: %s", tool, rc, msg)
	}
	return r
}

// isPermission: iptables exits 4 ("Permission denied (you must be root)")
// or, under some builds, 3 with the same text.
func isPermission(rc int, msg string) bool {
	return rc == 4 || strings.Contains(msg, "Permission denied") || strings.Contains(msg, "you must be root")
}
