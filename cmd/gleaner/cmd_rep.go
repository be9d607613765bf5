package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/trust"
	"github.com/gleaner-net/gleaner/node"
	"github.com/urfave/cli/v2"
)

func repCommand() *cli.Command {
	return &cli.Command{
		Name:  "rep",
		Usage: "reputation, as this node computes it from the replicated ledger",
		Subcommands: []*cli.Command{{
			Name:      "show",
			Usage:     "a peer's score and its parts",
			ArgsUsage: "<peer-id>",
			Description: `The score (0..1) combines this node's own paid experience with the peer
(beta scores) and trust propagated from the peers it has paid (personalised
EigenTrust), over ratings backed by a co-signed lease and a settlement that
carries the renter's signed voucher, weighted by the amount paid and decaying
with age; known-answer probes of a provider (canaries, replicas) count as
ratings too, and providers rate renters by whether they paid. A peer with no
paid history has no score. An objective fraud proof (a GPU leased twice,
telemetry contradicting the peer's hardware claim, a double-spent voucher,
an equivocating feed) convicts: no score, and the auction never awards it.
The output also shows the peer's hardware claim and its record as a renter.`,
			Flags: []cli.Flag{jsonFlag},
			Action: func(c *cli.Context) error {
				if c.Args().Len() != 1 {
					return usagef("peer IDs: gleaner peers, gleaner market offers", "rep show needs exactly one peer ID")
				}
				var ev trust.Evidence
				if err := callCmd(c, "rep_show", node.PeerParamsRep{Peer: c.Args().First()}, &ev); err != nil {
					return err
				}
				return emit(c, ev, func(w io.Writer) { printEvidence(w, ev) })
			},
		}},
	}
}

// printEvidence is `gleaner rep show`'s text: the score, then each part.
func printEvidence(w io.Writer, ev trust.Evidence) {
	fmt.Fprintf(w, "peer:       %s\n", ev.Peer)
	if ev.Score == nil {
		fmt.Fprintln(w, "score:      none (no paid history yet)")
	} else {
		fmt.Fprintf(w, "score:      %.3f\n", *ev.Score)
	}
	if ev.Frozen {
		fmt.Fprintln(w, "FROZEN:     its feed carries an equivocation proof")
	}
	for _, v := range ev.Convictions {
		fmt.Fprintf(w, "CONVICTED:  %s: %s (gleaner ledger proof %s > proof.cbor)\n", v.Kind, v.Detail, shortID(ev.Peer))
	}
	if c := ev.Claim; c != nil {
		label := ""
		if c.Simulated {
			label = " (SIMULATED)"
		}
		var models []string
		for _, g := range c.GPUs {
			models = append(models, fmt.Sprintf("%s %d MiB", g.Model, g.VRAMMiB))
		}
		fmt.Fprintf(w, "claims:     %d GPU(s)%s: %s\n", len(c.GPUs), label, strings.Join(models, ", "))
	}
	if len(ev.Probes) > 0 || ev.CanaryStreak > 0 {
		fmt.Fprintf(w, "probes:     %d passed, %d failed, %d inconclusive; canaries passed in a row: %d\n",
			ev.Probes[ledger.ProbePassed], ev.Probes[ledger.ProbeFailed], ev.Probes[ledger.ProbeInconclusive], ev.CanaryStreak)
	}
	if t := ev.Telemetry; t != nil {
		fmt.Fprintf(w, "telemetry:  %d runs, %d signed samples verified, %d rejected\n", t.Runs, t.Samples, t.Rejected)
	}
	if ev.Since != nil {
		fmt.Fprintf(w, "since:      %s (its feed's first entry)\n", ev.Since.Format("2006-01-02 15:04 MST"))
	}
	if len(ev.Payments) > 0 {
		fmt.Fprintf(w, "as renter:  %d leases paid, %d unpaid\n", ev.Payments["paid"], ev.Payments["unpaid"])
	}
	fmt.Fprintf(w, "leases:     %d, paid %s\n", ev.Leases, credits(ev.PaidTotal))
	for _, k := range slices.Sorted(maps.Keys(ev.Outcomes)) {
		fmt.Fprintf(w, "  %-10s %d\n", k, ev.Outcomes[k])
	}
}
