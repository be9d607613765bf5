package console

import (
	"fmt"
	"html"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// The calendar: the coming seven days, hour by hour, from offer_show's
// week (availability and the floor in force per tier, in the calendar's
// zone) and lease_list's gold leases (the reservations). Each hour is one
// of four states, told apart by pattern and by a letter as well as by
// colour, with a text legend and the same figures as a table.

// leaseEntry is one of lease_list's leases.
type leaseEntry struct {
	Lease *auction.Lease `json:"lease"`
	State string         `json:"state"`
}

// hour states, in the order the legend lists them.
const (
	hourOff      = "off"      // outside the availability windows
	hourOpen     = "open"     // available at the floors: bronze backfill and on-demand
	hourPeak     = "peak"     // available, a price period raises a floor
	hourReserved = "reserved" // a gold lease holds GPUs in it
)

// calRun is one run of hours of a day in the same state at the same prices.
type calRun struct {
	From, To string // HH:MM in the zone
	State    string
	Prices   []tierPrice
	Jobs     []string // the gold leases, when reserved
}

type calDay struct {
	Day, Date string
	States    [24]string
	Runs      []calRun
}

// calendarDays folds the week and the gold leases into per-hour states
// and runs. base is the settings' floors: an hour whose floor is above
// its tier's base is a peak hour.
func calendarDays(wk auction.PriceWeek, base auction.Prices, leases []leaseEntry) ([]calDay, error) {
	loc, err := time.LoadLocation(wk.TimeZone)
	if err != nil {
		return nil, err
	}
	baseOf := map[auction.Tier]auction.Credits{auction.Gold: base.Gold, auction.Silver: base.Silver, auction.Bronze: base.Bronze}
	var gold []*auction.Lease // the reservations: gold leases not over
	for _, l := range leases {
		if l.Lease != nil && l.Lease.Tier == auction.Gold && l.State != "ended" && l.State != "expired" {
			gold = append(gold, l.Lease)
		}
	}
	var out []calDay
	for _, d := range wk.Days {
		day, err := time.ParseInLocation("2006-01-02", d.Date, loc)
		if err != nil {
			return nil, fmt.Errorf("week day %q: %v", d.Date, err)
		}
		cd := calDay{Day: d.Day, Date: d.Date}
		var jobs [24][]string
		var prices [24][]tierPrice
		for h := 0; h < 24; h++ {
			from := time.Date(day.Year(), day.Month(), day.Day(), h, 0, 0, 0, loc).Unix()
			to := from + 3600
			for _, l := range gold {
				if l.Start < to && l.End > from {
					jobs[h] = append(jobs[h], l.JobID)
				}
			}
			st := hourOff
			if h < len(d.Available) && d.Available[h] {
				st = hourOpen
			}
			for _, t := range []auction.Tier{auction.Gold, auction.Silver, auction.Bronze} {
				if fs, ok := d.Floors[t]; ok && h < len(fs) {
					prices[h] = append(prices[h], tierPrice{string(t), fs[h]})
					if st == hourOpen && fs[h] > baseOf[t] {
						st = hourPeak
					}
				}
			}
			if len(jobs[h]) > 0 {
				st = hourReserved
			}
			cd.States[h] = st
		}
		for h := 0; h < 24; {
			e := h + 1
			for e < 24 && cd.States[e] == cd.States[h] && samePrices(prices[e], prices[h]) && strings.Join(jobs[e], ",") == strings.Join(jobs[h], ",") {
				e++
			}
			cd.Runs = append(cd.Runs, calRun{From: fmt.Sprintf("%02d:00", h), To: fmt.Sprintf("%02d:00", e), State: cd.States[h], Prices: prices[h], Jobs: jobs[h]})
			h = e
		}
		out = append(out, cd)
	}
	return out, nil
}

func samePrices(a, b []tierPrice) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// calStyle is each state's look: fill, pattern and letter, so that no
// state is told by colour alone.
var calStyle = map[string]struct{ fill, letter, word string }{
	hourOff:      {"url(#cal-off)", "–", "not available"},
	hourOpen:     {"#e6f0fa", "o", "available at the floors (bronze backfill, on demand)"},
	hourPeak:     {"url(#cal-peak)", "P", "available, a price period raises a floor"},
	hourReserved: {"url(#cal-gold)", "G", "a gold lease holds GPUs"},
}

// timelineSVG draws the days as rows of 24 hours. Each cell has its
// state's pattern and letter and a tooltip with the hour's prices; the
// aria-label is the whole week in words.
func timelineSVG(days []calDay, zone string) template.HTML {
	const cell, rowH, left, top = 26, 30, 92, 22
	if len(days) == 0 {
		return template.HTML(`<p class="empty">No week to draw.</p>`)
	}
	w, h := left+24*cell+4, top+len(days)*rowH+4
	var alt []string
	for _, d := range days {
		var parts []string
		for _, r := range d.Runs {
			parts = append(parts, r.From+"-"+r.To+" "+r.State)
		}
		alt = append(alt, d.Day+" "+d.Date+": "+strings.Join(parts, ", "))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart calendar" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		w, h, html.EscapeString("The coming week by hour ("+zone+"). "+strings.Join(alt, "; ")))
	b.WriteString(`<title>The coming week by hour</title><defs>` +
		`<pattern id="cal-off" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f2f2f2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9aa0a6" stroke-width="2"/></pattern>` +
		`<pattern id="cal-peak" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#cfe0f5"/><circle cx="3" cy="3" r="1.3" fill="#0b5cad"/></pattern>` +
		`<pattern id="cal-gold" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#f4c542"/><line x1="0" y1="3" x2="6" y2="3" stroke="#7a5a00" stroke-width="1.5"/></pattern>` +
		`</defs>`)
	for hr := 0; hr < 24; hr += 3 {
		fmt.Fprintf(&b, `<text class="lbl" x="%d" y="%d" text-anchor="start" font-size="11">%02d</text>`, left+hr*cell+2, top-8, hr)
	}
	for i, d := range days {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text class="lbl" x="4" y="%d" text-anchor="start" font-size="12">%s</text>`, y+rowH/2+4, html.EscapeString(d.Day+" "+d.Date[min(5, len(d.Date)):]))
		for _, r := range d.Runs {
			tip := d.Day + " " + r.From + "-" + r.To + ": " + r.State + ", " + calStyle[r.State].word
			for _, p := range r.Prices {
				tip += "; " + p.Tier + " " + auction.FormatCredits(p.Price)
			}
			if len(r.Jobs) > 0 {
				tip += "; gold job " + strings.Join(r.Jobs, ", ")
			}
			var from, to int
			fmt.Sscanf(r.From, "%d:", &from)
			fmt.Sscanf(r.To, "%d:", &to)
			st := calStyle[r.State]
			fmt.Fprintf(&b, `<g class="hours %s"><title>%s</title>`, r.State, html.EscapeString(tip))
			for hr := from; hr < to; hr++ {
				x := left + hr*cell
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" stroke="#fff"/><text x="%d" y="%d" text-anchor="middle" font-size="11" fill="#1b1f24">%s</text>`,
					x, y+2, cell, rowH-4, st.fill, x+cell/2, y+rowH/2+4, st.letter)
			}
			b.WriteString(`</g>`)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every piece of text above is escaped
}

// calLegend is the legend as text, in the states' order.
func calLegend() []struct{ Letter, Word, State string } {
	var out []struct{ Letter, Word, State string }
	for _, s := range []string{hourOff, hourOpen, hourPeak, hourReserved} {
		out = append(out, struct{ Letter, Word, State string }{calStyle[s].letter, calStyle[s].word, s})
	}
	return out
}

func (c *Console) calendar(w http.ResponseWriter, r *http.Request, se *session) {
	var o offerSettings
	if err := c.opts.Caller.Call(r.Context(), "offer_show", nil, &o); err != nil {
		c.fail(w, r, se, "calendar", err)
		return
	}
	var leases []leaseEntry
	if err := c.opts.Caller.Call(r.Context(), "lease_list", nil, &leases); err != nil {
		c.fail(w, r, se, "calendar", err)
		return
	}
	d := map[string]any{"Title": "Calendar", "Active": "calendar", "O": o, "Legend": calLegend()}
	if o.Week != nil {
		days, err := calendarDays(*o.Week, o.Settings.Prices, leases)
		if err != nil {
			c.fail(w, r, se, "calendar", err)
			return
		}
		d["Days"], d["Zone"], d["Chart"] = days, o.Week.TimeZone, timelineSVG(days, o.Week.TimeZone)
		if o.Week.MaxMultBP > auction.BP {
			d["Surge"] = auction.FormatBP(o.Week.MaxMultBP)
		}
	}
	c.render(w, r, http.StatusOK, "calendar", se, d)
}
