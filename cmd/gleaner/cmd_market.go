package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/urfave/cli/v2"
)

func marketCommand() *cli.Command {
	return &cli.Command{
		Name:  "market",
		Usage: "what is for sale: query every offer this node knows",
		Subcommands: []*cli.Command{{
			Name:      "offers",
			Usage:     "list offers matching a query",
			ArgsUsage: "[query]",
			Description: `A query is a list of clauses, all of which must hold: FIELD OP VALUE, with
OP one of = != < <= > >= in notin, and lists written [a,b]. Unknown fields,
operators or malformed values are errors, never silently dropped.

   gleaner market offers 'gpu in [H100,A100-80GB] vram>=40 region=eu gpus>=2 price.bronze<=1.5 available>=4h simulated=false' -o price.bronze
   gleaner market offers 'gpu=RTX4090' --explain
   gleaner market offers 'gpus>=2 free>=4h'    (four hours ahead not yet booked)
   gleaner market offers 'price.silver<=1.0' --for 4h    (a 4-hour silver job starting now)

Prices are those in effect: the owner's floor raised by any price period
(peak) in force, with the surge the offer's bookings imply; price.TIER
filters and sorts by them, floor.TIER by the base floor. With --start and
--for they are the prices over that job window, as a job would be quoted:
a peak anywhere in it prices all of it. A price above its base floor shows
the base beside it and, below the table, why.

Fields:
` + queryFieldHelp(),
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "order", Aliases: []string{"o"}, Usage: "sort by this field; prefix - for descending (e.g. -vram)"},
				&cli.IntFlag{Name: "limit", Value: 50, Usage: "show at most this many offers (1 to 10000)"},
				&cli.BoolFlag{Name: "explain", Usage: "show how many offers each clause removed"},
				&cli.StringFlag{Name: "start", Usage: "price a job window starting at `TIME` (RFC 3339, or +2h from now; a gold job's start); default now"},
				durationFlag("for", 0, "price a job window of this `DURATION` (the job's duration.max, e.g. 4h or 1d12h); default the instant --start"),
				jsonFlag,
			},
			Action: marketOffers,
		}},
	}
}

func queryFieldHelp() string {
	var b strings.Builder
	for _, f := range auction.QueryFields() {
		fmt.Fprintf(&b, "   %-14s %-9s %s (%s)\n", f.Name, f.Type, f.Help, f.Unit)
	}
	return b.String()
}

func marketOffers(c *cli.Context) error {
	if c.Args().Len() > 1 {
		return usagef("quote the whole query: gleaner market offers 'gpu=H100 vram>=80'", "market offers takes one query argument, got %d", c.Args().Len())
	}
	if err := checkLimit(c, 10000); err != nil {
		return err
	}
	var res node.MarketOffersResult
	p := node.MarketOffersParams{Query: c.Args().First(), Order: c.String("order"), Limit: c.Int("limit"),
		ForS: int64(durationOf(c, "for") / time.Second)}
	if s := c.String("start"); s != "" {
		t, err := parseStart(s, time.Now())
		if err != nil {
			return usagef("--start 2026-03-26T18:00:00Z or --start +2h", "--start: %v", err)
		}
		p.Start = t
	}
	if err := callCmd(c, "market_offers", p, &res); err != nil {
		return err
	}
	return emit(c, res, func(w io.Writer) { printOffers(w, res, c.Bool("explain"), window(p)) })
}

// parseStart reads --start: RFC 3339, or + and a duration from now.
func parseStart(s string, now time.Time) (time.Time, error) {
	if d, ok := strings.CutPrefix(s, "+"); ok {
		dur, err := auction.ParseDuration(d)
		if err != nil {
			return time.Time{}, err
		}
		return now.Add(dur), nil
	}
	return time.Parse(time.RFC3339, s)
}

// window says what the prices are for: "now", or the job window.
func window(p node.MarketOffersParams) string {
	switch {
	case p.Start.IsZero() && p.ForS == 0:
		return "in effect now"
	case p.Start.IsZero():
		return "for " + availability(p.ForS) + " from now"
	case p.ForS == 0:
		return "at " + p.Start.Local().Format(time.DateTime)
	}
	return "for " + availability(p.ForS) + " from " + p.Start.Local().Format(time.DateTime)
}

func printOffers(w io.Writer, res node.MarketOffersResult, explain bool, when string) {
	if len(res.Offers) > 0 {
		rows := [][]string{{"PROVIDER", "GPUS", "VRAM", "REGION", "GOLD", "SILVER", "BRONZE", "AVAILABLE", "NEXT FREE"}}
		var why []string
		for _, o := range res.Offers {
			rows = append(rows, []string{shortID(o.Provider), gpuSummary(o), vramSummary(o),
				o.Region.Continent + "/" + o.Region.Country, price(o, "gold"), price(o, "silver"), price(o, "bronze"),
				availability(o.AvailableForS), nextFree(o.NextFree)})
			for _, t := range []string{"gold", "silver", "bronze"} {
				if pv, ok := o.InEffect[t]; ok && pv.Why != "" {
					why = append(why, fmt.Sprintf("  %s %s %s: %s", shortID(o.Provider), t, auction.FormatCredits(pv.Price), pv.Why))
				}
			}
		}
		table(w, rows)
		if len(why) > 0 {
			fmt.Fprintln(w, "above the base floor:")
			for _, l := range why {
				fmt.Fprintln(w, l)
			}
		}
	}
	fmt.Fprintf(w, "%d offer(s) shown, %d matched of %d known (prices %s: credits per GPU-hour; base floor in brackets where higher)\n",
		len(res.Offers), res.Explain.Matched, res.Explain.Considered, when)
	if explain || res.Explain.Matched == 0 {
		fmt.Fprint(w, res.Explain.String())
	}
}

func shortID(id string) string { return p2p.ShortID(id) }

func gpuSummary(o node.OfferView) string {
	counts := map[string]int{}
	var order []string
	for _, g := range o.GPUs {
		m := g.Model
		if g.Simulated {
			m += "(simulated)"
		}
		if counts[m] == 0 {
			order = append(order, m)
		}
		counts[m]++
	}
	var parts []string
	for _, m := range order {
		parts = append(parts, strconv.Itoa(counts[m])+"x"+m)
	}
	return strings.Join(parts, ",")
}

func vramSummary(o node.OfferView) string {
	if len(o.GPUs) == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(o.GPUs[0].VRAMMiB)/1024, 'f', 0, 64) + " GiB"
}

// price is the tier's price in effect, with the base floor beside it
// when a peak or the surge raises it: "2 (1)".
func price(o node.OfferView, tier string) string {
	base, ok := o.Prices[tier]
	if !ok {
		return "-"
	}
	pv, ok := o.InEffect[tier]
	if !ok || pv.Price == base { // an older node's view has no in_effect
		return auction.FormatCredits(base)
	}
	return auction.FormatCredits(pv.Price) + " (" + auction.FormatCredits(base) + ")"
}

// nextFree is the offer's next free window (a GPU neither outside its
// windows nor booked): when it starts and how long it lasts, "now, 8h0m0s"
// or "in 3h0m0s, 5h0m0s"; "none" when its bookings fill every window.
func nextFree(f *node.FreeWindowView) string {
	if f == nil {
		return "none"
	}
	start := "now"
	if f.InS >= 60 {
		start = "in " + (time.Duration(f.InS/60) * time.Minute).String()
	}
	return start + ", " + availability(f.ForS)
}

// availability rounds to minutes; offers carry a 7-day horizon, so
// "always" shows as 7d+.
func availability(secs int64) string {
	if secs >= 7*24*3600-60 {
		return "7d+"
	}
	return (time.Duration(secs/60) * time.Minute).String()
}
