package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/rpc"
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
   gleaner offer set --peak "mon-fri 17:00-22:00 x1.5" --surge 0.5 --surge-cap 2x
   gleaner offer show
   gleaner offer pause
   gleaner offer clear-fault --gpu 0`,
		Subcommands: []*cli.Command{
			{Name: "show", Usage: "the current offer, why nothing is offered, and each GPU's state", Flags: []cli.Flag{jsonFlag}, Action: offerShow},
			offerSetCommand(),
			{Name: "pause", Usage: "withdraw the offer (renters drop it at once) until resume", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error { return offerCall(c, "offer_pause", nil) }},
			{Name: "resume", Usage: "offer again after pause", Flags: []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error { return offerCall(c, "offer_resume", nil) }},
			offerClearFaultCommand(),
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
		return withFlagNames(err, offerParamFlags)
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
	fmt.Fprintf(w, "pricing:     %s\n", describePricing(s.Pricing))
	if r.Week != nil {
		printWeek(w, *r.Week)
	}
	fmt.Fprintf(w, "policy:      workloads %s; max duration %s; bronze notice %s; egress %t\n",
		strings.Join(s.Policy.Workloads, ","), durOrNone(s.Policy.MaxDurationSec), time.Duration(s.Policy.PreemptNotice)*time.Second, s.Policy.Egress)
	fmt.Fprintf(w, "limits:      %s\n", describeLimits(s.Limits))
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
		rows = append(rows, []string{fmt.Sprint(g.Index), model, fmt.Sprintf("%.0f GiB", float64(g.VRAMMiB)/1024),
			fmt.Sprintf("%d°C", g.TempC), fmt.Sprintf("%.0f W", g.PowerW), gpuState(g)})
	}
	table(w, rows)
}

// gpuState is offer show's STATE cell: the lease holding the GPU, if
// any, said first (a withdrawn GPU may still run a silver or gold lease
// out), then what the owner's rules and the offer make of it; "free"
// only when nothing holds it.
func gpuState(g node.GPUStatus) string {
	state := "offered, free"
	if g.Lease != nil {
		state = "offered"
	}
	switch {
	case g.Fault != "":
		state = "FAULTY, its jobs stopped, withdrawn until `offer clear-fault --gpu " + fmt.Sprint(g.Index) + "` or a restart: " + g.Fault
	case g.Stopping != "":
		state = "STOPPING ITS JOBS: " + g.Stopping
	case g.Withdrawn != "":
		state = "withdrawn: " + g.Withdrawn
	case !g.Offered:
		state = "not offered"
	}
	if l := g.Lease; l != nil {
		state = fmt.Sprintf("leased: job %s, %s, %s at %s per GPU-hour, until %s; %s", l.JobID, l.Tier, l.State,
			credits(l.Price), l.Until.Local().Format(time.DateTime), state)
	}
	return state
}

// describeLimits says what the owner's GPU limits do: the soft ones take a
// GPU out of the offer (and preempt its bronze jobs), the hard ones stop
// every job on it.
func describeLimits(l attest.Limits) string {
	part := func(t int, p float64) string {
		var s []string
		if t > 0 {
			s = append(s, fmt.Sprintf("%d°C", t))
		}
		if p > 0 {
			s = append(s, fmt.Sprintf("%g W", p))
		}
		return strings.Join(s, " or ")
	}
	soft, hard := part(l.MaxTempC, l.MaxPowerW), part(l.StopTempC, l.StopPowerW)
	switch {
	case soft == "" && hard == "":
		return "none (--max-temp/--max-power withdraw a GPU, --stop-temp/--stop-power stop its jobs)"
	case hard == "":
		return "withdraw a GPU above " + soft + " (its bronze jobs are preempted); no hard limit"
	case soft == "":
		return "stop every job on a GPU above " + hard + " (silver and gold too, with their notice)"
	}
	return "withdraw a GPU above " + soft + " (its bronze jobs are preempted); stop every job on it above " + hard
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

// describePricing is the owner's schedule on one line, in the flags'
// own syntax.
func describePricing(p auction.Pricing) string {
	periods := "the floors at every hour"
	if len(p.Periods) > 0 {
		var parts []string
		for _, pp := range p.Periods {
			parts = append(parts, pp.String())
		}
		periods = "peaks " + strings.Join(parts, "; ") + " (" + p.TimeZone + ")"
	}
	surge := "no surge"
	if p.SurgeBP > 0 {
		surge = "surge " + auction.FormatBP(p.SurgeBP) + " when busy, at most x" + auction.FormatBP(p.MaxMultBP())
	}
	return periods + "; " + surge
}

// weekLevels are the chart's marks for a tier's distinct floors, lowest
// first; the last stands for itself and every higher one.
const weekLevels = "-=+*#"

// printWeek draws the week's floors in force: a row per day, a column per
// hour, a strip per offered tier, each mark a price level (the legend says
// which) and '.' an hour without availability.
func printWeek(w io.Writer, wk auction.PriceWeek) {
	if len(wk.Days) == 0 {
		return
	}
	var tiers []auction.Tier
	for _, t := range []auction.Tier{auction.Gold, auction.Silver, auction.Bronze} {
		if _, ok := wk.Days[0].Floors[t]; ok {
			tiers = append(tiers, t)
		}
	}
	if len(tiers) == 0 {
		return
	}
	levels := map[auction.Tier][]auction.Credits{}
	for _, t := range tiers {
		seen := map[auction.Credits]bool{}
		for _, d := range wk.Days {
			for _, c := range d.Floors[t] {
				if !seen[c] {
					seen[c] = true
					levels[t] = append(levels[t], c)
				}
			}
		}
		slices.Sort(levels[t])
	}
	mark := func(t auction.Tier, c auction.Credits) byte {
		i, _ := slices.BinarySearch(levels[t], c)
		return weekLevels[min(i, len(weekLevels)-1)]
	}
	const strip = "%-26s"
	fmt.Fprintf(w, "week:        floors by hour, credits per GPU-hour (%s); . = not available\n", wk.TimeZone)
	head, axis := "", ""
	for _, t := range tiers {
		head += fmt.Sprintf(strip, string(t))
		axis += fmt.Sprintf(strip, "0     6     12    18")
	}
	fmt.Fprintf(w, "  %-11s%s\n  %-11s%s\n", "", strings.TrimRight(head, " "), "", strings.TrimRight(axis, " "))
	for _, d := range wk.Days {
		row := ""
		for _, t := range tiers {
			cells := make([]byte, 24)
			for h := range cells {
				cells[h] = '.'
				if h < len(d.Available) && d.Available[h] && h < len(d.Floors[t]) {
					cells[h] = mark(t, d.Floors[t][h])
				}
			}
			row += fmt.Sprintf(strip, cells)
		}
		fmt.Fprintf(w, "  %-11s%s\n", d.Day+" "+d.Date[min(5, len(d.Date)):], strings.TrimRight(row, " "))
	}
	for _, t := range tiers {
		var parts []string
		for i, c := range levels[t] {
			if i == len(weekLevels)-1 && len(levels[t]) > len(weekLevels) {
				parts = append(parts, fmt.Sprintf("%c %s and above", weekLevels[i], auction.FormatCredits(c)))
				break
			}
			parts = append(parts, fmt.Sprintf("%c %s", weekLevels[i], auction.FormatCredits(c)))
		}
		fmt.Fprintf(w, "  %-11s%s: %s\n", "", t, strings.Join(parts, "  "))
	}
	if wk.MaxMultBP > auction.BP {
		fmt.Fprintf(w, "  %-11ssurge: up to x%s these when fully busy\n", "", auction.FormatBP(wk.MaxMultBP))
	}
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
   gleaner offer set --max-temp 83 --max-power 320
   gleaner offer set --stop-temp 92 --stop-power 400   # hard limits: stop every job, silver and gold too
   gleaner offer set --peak "mon-fri 09:00-18:00 x1.5" --peak "sat,sun 10:00-16:00 gold=2.0"
   gleaner offer set --surge 0.5 --surge-cap 2x

A price period raises the floors while it holds (x1.5 multiplies every
offered tier's floor; gold=2.0 sets that tier's floor instead); a job is
priced at the highest period it meets from its start to duration.max.
Surge raises a quote with this machine's utilisation, from half busy up to
1+SURGE times the floor in force, never above the cap, 4x or the renter's
max_price. gleaner offer show draws the week's prices.`,
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
			&cli.IntFlag{Name: "stop-temp", Usage: "hard limit: above this temperature in °C every job on the GPU is stopped with its notice, silver and gold too; 0 = none"},
			&cli.Float64Flag{Name: "stop-power", Usage: "hard limit: above this power draw in W every job on the GPU is stopped with its notice; 0 = none"},
			&cli.GenericFlag{Name: "peak", Value: &peakList{}, Usage: `price period in the calendar's zone: "DAYS HH:MM-HH:MM" then x1.5 (the floors times 1.5) and/or tier floors gold=2.0; repeatable or ';'-separated; replaces the list; "" = none`},
			str("peak.gold", "gold floor in every price period, credits per GPU-hour; 0 = the period's multiplier"),
			str("peak.silver", "silver floor in every price period"),
			str("peak.bronze", "bronze floor in every price period"),
			str("surge", "raise quotes with utilisation: fully busy asks 1+SURGE times the floor in force, e.g. 0.5; 0 = none; at most 3"),
			str("surge-cap", "most a surge may ask, as a multiple of the floor in force, e.g. 2x; 0 = only the hard bound, 4x"),
			jsonFlag,
		},
		Action: func(c *cli.Context) error {
			if err := finiteFlags(c, "power is in watts, e.g. --max-power 350", "max-power", "stop-power"); err != nil {
				return err
			}
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
func offerPatch(c *cli.Context) (offers.Patch, int) {
	var p offers.Patch
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
	if c.IsSet("stop-temp") {
		v := c.Int("stop-temp")
		p.StopTempC = &v
		n++
	}
	if c.IsSet("stop-power") {
		v := c.Float64("stop-power")
		p.StopPowerW = &v
		n++
	}
	if c.IsSet("peak") {
		if pl, ok := c.Generic("peak").(*peakList); ok {
			v := strings.Join(*pl, "; ")
			p.Peak = &v
			n++
		}
	}
	sp("peak.gold", &p.PeakGold)
	sp("peak.silver", &p.PeakSilver)
	sp("peak.bronze", &p.PeakBronze)
	sp("surge", &p.Surge)
	sp("surge-cap", &p.SurgeCap)
	return p, n
}

// peakList collects every --peak as given: a StringSliceFlag would split
// at the commas that day lists ("sat,sun") and tier floors use.
type peakList []string

func (l *peakList) Set(v string) error { *l = append(*l, v); return nil }
func (l *peakList) String() string     { return strings.Join(*l, "; ") }

func offerClearFaultCommand() *cli.Command {
	return &cli.Command{
		Name:  "clear-fault",
		Usage: "offer a GPU that faulted (an Xid, an ECC error) again, without a restart, once you have inspected it",
		Description: `When the driver reports a GPU faulty (an Xid critical error, a rise in its
uncorrected ECC error count), the node stops every job on it and withdraws it;
` + "`gleaner offer show`" + ` marks it FAULTY. It stays out of the offer until you clear the
fault here or restart the node. Clear it only after you have looked at the card:

   nvidia-smi -q -i N            # ECC counts, retired pages, clocks, throttling
   sudo dmesg | grep -i xid      # which Xid, and when
   gleaner offer clear-fault --gpu N

The GPU is offered again from the monitor's next poll (asked for at once)
unless a new fault arrives: another Xid, a further ECC rise. A GPU that
faults again and again, or an Xid such as 79 (fallen off the bus), 48 or
94/95 (uncorrectable ECC), wants a reset, a reboot or repair, not this.
A GPU that is not faulted is an error (exit 1), as is an unknown index.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "gpu", Usage: "the faulted GPU's index `N`, as 'gleaner offer show' lists it", DefaultText: "none, required"},
			jsonFlag,
		},
		Action: offerClearFault,
	}
}

func offerClearFault(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("see `gleaner offer clear-fault --help`", "unexpected argument %q", c.Args().First())
	}
	if !c.IsSet("gpu") {
		return usagef("`gleaner offer show` lists the GPUs; a FAULTY one is what this clears", "--gpu N is required: which GPU's fault to clear")
	}
	gpu := c.Int("gpu")
	var res node.ClearFaultResult
	err := callCmd(c, "offer_clear_fault", node.ClearFaultParams{GPU: &gpu}, &res)
	var re *rpc.Error
	switch {
	case errors.As(err, &re) && re.Code == node.CodeNoSuchGPU:
		return withHint(err, "`gleaner offer show` lists this node's GPUs by index")
	case errors.As(err, &re) && re.Code == node.CodeGPUNotFaulted:
		return withHint(err, "only a GPU `gleaner offer show` marks FAULTY has a fault to clear")
	case err != nil:
		return withFlagNames(err, map[string]string{"gpu": "--gpu"})
	}
	return emit(c, res, func(w io.Writer) { printClearFault(w, res) })
}

func printClearFault(w io.Writer, r node.ClearFaultResult) {
	fmt.Fprintf(w, "GPU %d: fault cleared (it was: %s)\n", r.GPU, r.Cleared)
	switch {
	case r.Status == nil:
		fmt.Fprintln(w, "state: unknown; `gleaner offer show` shows it")
	case !r.Polled:
		fmt.Fprintf(w, "state: %s\n(the monitor has not polled since; `gleaner offer show` shows the GPU offered from its next poll, unless a new fault arrives)\n", gpuState(*r.Status))
	case r.Status.Fault != "":
		fmt.Fprintf(w, "state: %s\na NEW fault arrived at once: inspect the GPU again (nvidia-smi -q -i %d, dmesg | grep -i xid)\n", gpuState(*r.Status), r.GPU)
	default:
		fmt.Fprintf(w, "state: %s\n", gpuState(*r.Status))
	}
}
