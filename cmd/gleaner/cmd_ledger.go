package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node"
	"github.com/urfave/cli/v2"
)

func ledgerCommand() *cli.Command {
	return &cli.Command{
		Name:  "ledger",
		Usage: "the replicated, hash-chained log: feeds, entries and fraud proofs",
		Description: `Every node appends signed entries (leases, outcomes, ...) to its own feed;
feeds replicate to every node, which checks each entry's signature and chain.
Two entries by one author with one sequence number are a fraud proof that
freezes the author's feed everywhere and can be checked offline.

   gleaner ledger heads
   gleaner ledger balance
   gleaner ledger history [--author PEER]
   gleaner ledger show CID
   gleaner ledger proof PEER > proof.cbor
   gleaner ledger verify-proof proof.cbor      (offline: no daemon needed)`,
		Subcommands: []*cli.Command{
			{Name: "heads", Usage: "every feed's head", Flags: []cli.Flag{jsonFlag}, Action: func(c *cli.Context) error {
				var hs []node.HeadView
				if err := callCmd(c, "ledger_heads", nil, &hs); err != nil {
					return err
				}
				return emit(c, hs, func(w io.Writer) {
					rows := [][]string{{"AUTHOR", "SEQ", "HEAD", "STATE"}}
					for _, h := range hs {
						state := "ok"
						if h.Frozen {
							state = "FROZEN (equivocated)"
						}
						rows = append(rows, []string{h.Author, strconv.FormatUint(h.Seq, 10), h.CID, state})
					}
					table(w, rows)
				})
			}},
			{Name: "history", Usage: "a feed's newest entries", Flags: []cli.Flag{
				&cli.StringFlag{Name: "author", Usage: "peer ID (default: this node)"},
				&cli.IntFlag{Name: "limit", Value: 50, Usage: "entries to show (1 to 1000)"}, jsonFlag},
				Action: func(c *cli.Context) error {
					if err := checkLimit(c, 1000); err != nil {
						return err
					}
					var es []node.EntryView
					if err := callCmd(c, "ledger_history", node.HistoryParams{Author: c.String("author"), Limit: c.Int("limit")}, &es); err != nil {
						return err
					}
					return emit(c, es, func(w io.Writer) {
						rows := [][]string{{"SEQ", "TYPE", "TIME", "AMOUNT", "CID"}}
						for _, e := range es {
							rows = append(rows, []string{strconv.FormatUint(e.Seq, 10), e.Type, e.Time.Local().Format("2006-01-02 15:04:05"), entryAmount(e), e.CID})
						}
						table(w, rows)
					})
				}},
			{Name: "balance", Usage: "testnet credits: faucet, earnings by day, spend per lease", Flags: []cli.Flag{jsonFlag}, Action: func(c *cli.Context) error {
				var b node.BalanceResult
				if err := callCmd(c, "ledger_balance", nil, &b); err != nil {
					return err
				}
				return emit(c, b, func(w io.Writer) {
					fmt.Fprintf(w, "balance: %s (faucet %s + earned %s - spent %s)\n", credits(b.Balance),
						credits(b.Faucet), credits(b.Earned), credits(b.Spent))
					for _, day := range slices.Sorted(maps.Keys(b.ByDay)) {
						fmt.Fprintf(w, "  earned %s: %s\n", day, credits(b.ByDay[day]))
					}
					for _, job := range slices.Sorted(maps.Keys(b.SpentByJob)) {
						fmt.Fprintf(w, "  spent on %s: %s\n", job, credits(b.SpentByJob[job]))
					}
					for _, lease := range slices.Sorted(maps.Keys(b.SpentFor)) {
						fmt.Fprintf(w, "  spent on lease %s: %s\n", lease, credits(b.SpentFor[lease]))
					}
				})
			}},
			{Name: "show", Usage: "one entry", ArgsUsage: "<cid>", Flags: []cli.Flag{jsonFlag}, Action: func(c *cli.Context) error {
				if c.Args().Len() != 1 {
					return usagef("CIDs: gleaner ledger history", "show needs exactly one CID")
				}
				var e node.EntryView
				if err := callCmd(c, "ledger_show", node.CIDParams{CID: c.Args().First()}, &e); err != nil {
					return err
				}
				c.Set("json", "true")
				return emit(c, e, nil)
			}},
			{Name: "proof", Usage: "write the fraud proof that froze an author's feed to stdout", ArgsUsage: "<peer-id>", Action: func(c *cli.Context) error {
				if c.Args().Len() != 1 {
					return usagef("frozen feeds: gleaner ledger heads", "proof needs exactly one peer ID")
				}
				var proof []byte
				if err := callCmd(c, "ledger_proof", node.HistoryParams{Author: c.Args().First()}, &proof); err != nil {
					return err
				}
				_, err := c.App.Writer.Write(proof)
				return err
			}},
			{Name: "verify-proof", Usage: "check a fraud proof offline (equivocation, double-spent voucher, GPU leased twice, telemetry contradicting a hardware claim)", ArgsUsage: "<file>", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					if c.Args().Len() != 1 {
						return usagef("for example: gleaner ledger verify-proof proof.cbor", "verify-proof needs exactly one file")
					}
					b, err := os.ReadFile(c.Args().First())
					if err != nil {
						return usagef("", "cannot read the proof: %v", err)
					}
					v, err := ledger.VerifyAnyProof(b)
					if err != nil {
						return fmt.Errorf("not a valid fraud proof: %v", err)
					}
					out := struct {
						Valid bool `json:"valid"`
						ledger.Verdict
					}{true, v}
					return emit(c, out, func(w io.Writer) {
						fmt.Fprintf(w, "valid %s proof against %s\n", v.Kind, v.Author)
						if v.Detail != "" {
							fmt.Fprintf(w, "  %s\n", v.Detail)
						}
					})
				}},
		},
	}
}

// entryAmount is an entry's money with its unit and what it is; "" for
// an entry that carries none.
func entryAmount(e node.EntryView) string {
	if e.Amount == nil {
		return ""
	}
	if e.AmountIs == node.AmountPerHour {
		return credits(*e.Amount) + " per GPU-hour"
	}
	return credits(*e.Amount) + " " + e.AmountIs
}
