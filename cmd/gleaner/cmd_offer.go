package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
	"github.com/urfave/cli/v2"
)

func offerCommand() *cli.Command {
	return &cli.Command{
		Name:  "offer",
		Usage: "what this node sells: show, change, pause or resume its GPU offer",
		Description: `A provider's node signs an offer (GPUs, region, price floors per tier,
availability windows, policy) and gossips it to every renter, re-announcing it
before it expires. Changes take effect at once, without a restart.

   gleaner offer set --region eu/DE --price.bronze 0.45 --price.silver 0.8
   gleaner offer set --tz Europe/Berlin --weekly "mon-fri 19:00-08:00; sat,sun 00:00-24:00"
   gleaner offer show
   gleaner offer pause`,
		Subcommands: []*cli.Command{
			{Name: "show", Usage: "the current offer, why nothing is offered, and each GPU's state", Flags: []cli.Flag{jsonFlag}, Action: offerShow},
			offerSetCommand(),
			{Name: "pause", Usage: "withdraw the offer (renters drop it at once) until resume", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error { return offerCall(c, "offer_pause", nil) }},
			{Name: "resume", Usage: "offer again after pause", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error { return offerCall(c, "offer_resume", nil) }},
		},
	}
}

func offerShow(c *cli.Context) error { return offerCall(c, "offer_show", nil) }

func offerCall(c *cli.Context, method string, params any) error {
	if c.Args().Present() {
		return usagef("see `gleaner offer --help`", "unexpected argument %q", c.Args().First())
	}
	var res node.OfferShowResult
	if err := callCmd(c, method, params, &res); err != nil {
		return err
	}
	return emit(c, res, func(w io.Writer) { printOfferShow(w, res) })
}

func printOfferShow(w io.Writer, r node.OfferShowResult) {
	if r.Offered {
		o := r.Offer
		fmt.Fprintf(w, "offered:     yes (seq %d, expires %s)\n", o.Seq, o.ExpiresAt.Local().Format(time.Kitchen))
		fmt.Fprintf(w, "region:      %s/%s\n", o.Region.Continent, o.Region.Country)
		fmt.Fprintf(w, "prices:      %s credits per GPU-hour\n", formatPrices(o.Prices))
		fmt.Fprintf(w, "available:   %s from now\n", availability(o.AvailableForS))
	} else {
		fmt.Fprintf(w, "offered:     no: %s\n", r.Reason)
	}
	s := r.Settings
	weekly := "always"
	if len(s.Calendar.Weekly) > 0 {
		var parts []string
		for _, ww := range s.Calendar.Weekly {
			parts = append(parts, strings.Join(ww.Days, ",")+" "+ww.Start+"-"+ww.End)
		}
		weekly = strings.Join(parts, "; ")
	}
	fmt.Fprintf(w, "calendar:    %s (%s), %d one-off, %d blackout(s)\n", weekly, s.Calendar.TimeZone, len(s.Calendar.OneOff), len(s.Calendar.Blackouts))
	fmt.Fprintf(w, "policy:      workloads %s; max duration %s; bronze notice %s; egress %t\n",
		strings.Join(s.Policy.Workloads, ","), durOrNone(s.Policy.MaxDurationSec), time.Duration(s.Policy.PreemptNotice)*time.Second, s.Policy.Egress)
	if r.GPUError != "" {
		fmt.Fprintf(w, "gpus:        %s\n", r.GPUError)
		return
	}
	rows := [][]string{{"GPU", "MODEL", "VRAM", "TEMP", "POWER", "STATE"}}
	for _, g := range r.GPUs {
		model := g.Model
		if g.Simulated {
			model += " (simulated)"
		}
		state := "offered"
		if g.Withdrawn != "" {
			state = "withdrawn: " + g.Withdrawn
		} else if !g.Offered {
			state = "not offered"
		}
		rows = append(rows, []string{fmt.Sprint(g.Index), model, fmt.Sprintf("%.0f GiB", float64(g.VRAMMiB)/1024),
			fmt.Sprintf("%d°C", g.TempC), fmt.Sprintf("%.0f W", g.PowerW), state})
	}
	table(w, rows)
}

func formatPrices(p map[string]auction.Credits) string {
	var parts []string
	for _, t := range []string{"gold", "silver", "bronze"} {
		if v, ok := p[t]; ok {
			parts = append(parts, t+" "+auction.FormatCredits(v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func durOrNone(s int64) string {
	if s == 0 {
		return "none"
	}
	return (time.Duration(s) * time.Second).String()
}

func offerSetCommand() *cli.Command {
	str := func(name, usage string) *cli.StringFlag { return &cli.StringFlag{Name: name, Usage: usage} }
	return &cli.Command{
		Name:  "set",
		Usage: "change the offer; only the flags given change",
		Description: `Every value is checked; a bad one is refused with the field and the reason,
and nothing changes.

   gleaner offer set --region eu/DE --price.bronze 0.45
   gleaner offer set --weekly "mon-fri 19:00-08:00; sat,sun 00:00-24:00" --tz Europe/Berlin
   gleaner offer set --blackout 2026-12-24T00:00:00+01:00/2026-12-27T00:00:00+01:00
   gleaner offer set --workloads batch,service --max-duration 12h --notice 2m
   gleaner offer set --max-temp 83 --max-power 320`,
		Flags: []cli.Flag{
			str("region", "continent/country, e.g. eu/DE, na/US (continents: af an as eu na oc sa)"),
			str("price.gold", "floor for reserved (gold) jobs, credits per GPU-hour; 0 = do not offer gold"),
			str("price.silver", "floor for on-demand (silver) jobs"),
			str("price.bronze", "floor for preemptible (bronze) jobs"),
			str("tz", "IANA time zone of the calendar, e.g. Europe/Berlin"),
			str("weekly", `weekly windows, e.g. "mon-fri 19:00-08:00; sat,sun 00:00-24:00"; "" = always`),
			&cli.StringSliceFlag{Name: "one-off", Usage: "extra window START/END (RFC 3339); repeatable; replaces the list"},
			&cli.StringSliceFlag{Name: "blackout", Usage: "unavailable window START/END (RFC 3339); repeatable; replaces the list"},
			&cli.BoolFlag{Name: "clear-one-off", Usage: "remove every one-off window"},
			&cli.BoolFlag{Name: "clear-blackouts", Usage: "remove every blackout"},
			str("workloads", "allowed workload kinds: batch, service or batch,service"),
			&cli.StringSliceFlag{Name: "image", Usage: "allowed image pattern, e.g. 'ghcr.io/acme/*'; repeatable; replaces the list"},
			&cli.BoolFlag{Name: "any-image", Usage: "allow any image (clears the allowlist)"},
			str("max-duration", "longest job accepted, e.g. 12h; 0 = no limit"),
			str("notice", "notice given before a bronze job is preempted, e.g. 2m"),
			&cli.BoolFlag{Name: "egress", Usage: "let job containers reach the network (--egress=false to forbid)"},
			&cli.IntFlag{Name: "max-temp", Usage: "withdraw a GPU above this temperature in °C; 0 = no limit"},
			&cli.Float64Flag{Name: "max-power", Usage: "withdraw a GPU above this power draw in W; 0 = no limit"},
			jsonFlag,
		},
		Action: func(c *cli.Context) error {
			p, n := offerPatch(c)
			if n == 0 {
				return usagef("see `gleaner offer set --help`", "offer set needs at least one setting to change")
			}
			return offerCall(c, "offer_set", p)
		},
	}
}

// offerPatch turns the flags that were given into a patch, so that flags
// left out never overwrite anything.
func offerPatch(c *cli.Context) (node.OfferPatch, int) {
	var p node.OfferPatch
	n := 0
	sp := func(name string, dst **string) {
		if c.IsSet(name) {
			v := c.String(name)
			*dst = &v
			n++
		}
	}
	sp("region", &p.Region)
	sp("price.gold", &p.PriceGold)
	sp("price.silver", &p.PriceSilver)
	sp("price.bronze", &p.PriceBronze)
	sp("tz", &p.TimeZone)
	sp("weekly", &p.Weekly)
	if c.IsSet("workloads") {
		var v []string
		for _, w := range strings.Split(c.String("workloads"), ",") {
			if w = strings.TrimSpace(w); w != "" {
				v = append(v, w)
			}
		}
		p.Workloads = &v
		n++
	}
	sp("max-duration", &p.MaxDuration)
	sp("notice", &p.PreemptNotice)
	list := func(name, clear string, dst **[]string) {
		if c.IsSet(name) {
			v := c.StringSlice(name)
			*dst = &v
			n++
		} else if clear != "" && c.Bool(clear) {
			v := []string{}
			*dst = &v
			n++
		}
	}
	list("one-off", "clear-one-off", &p.OneOff)
	list("blackout", "clear-blackouts", &p.Blackouts)
	list("image", "any-image", &p.Images)
	if c.IsSet("egress") {
		v := c.Bool("egress")
		p.Egress = &v
		n++
	}
	if c.IsSet("max-temp") {
		v := c.Int("max-temp")
		p.MaxTempC = &v
		n++
	}
	if c.IsSet("max-power") {
		v := c.Float64("max-power")
		p.MaxPowerW = &v
		n++
	}
	return p, n
}
