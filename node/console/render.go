package console

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// pageNames are the templates/<name>.html files, each rendered inside
// layout.html.
var pageNames = []string{"login", "overview", "gpus", "jobs", "job", "market", "earnings", "error", "services", "service", "spend", "offer", "calendar", "gpu", "reputation", "array"}

func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		out[n] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+n+".html"))
	}
	return out
}

// view is what layout.html sees: the page's own data is D.
type view struct {
	Title  string
	Active string // the nav entry to mark
	CSRF   string // empty: logged out, no nav
	Error  string
	D      any
}

// render executes into a buffer first, so that a template error is a
// clean 500 and not half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, name string, se *session, d map[string]any) {
	v := view{D: d}
	if t, ok := d["Title"].(string); ok {
		v.Title = t
	}
	if e, ok := d["Error"].(string); ok {
		v.Error = e
	}
	if a, ok := d["Active"].(string); ok {
		v.Active = a
	}
	if se != nil {
		v.CSRF = se.csrf
	}
	var b bytes.Buffer
	if err := c.pages[name].Execute(&b, v); err != nil {
		c.opts.Log.Error("console: rendering page", "page", name, "err", err)
		http.Error(w, "console: cannot render this page (see the node's log)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

// fail shows an RPC error in the page frame rather than a bare 500: the
// message is the node's own, as the CLI would print it.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, se *session, active string, err error) {
	c.render(w, r, http.StatusBadGateway, "error", se, map[string]any{"Title": "Error", "Active": active, "Error": err.Error()})
}

var funcs = template.FuncMap{
	// credits: an amount with its unit, via the repo's one formatter.
	"credits": func(c auction.Credits) string { return auction.FormatCredits(c) + " credits" },
	"perHour": func(c auction.Credits) string { return auction.FormatCredits(c) + " credits/GPU-h" },
	"creditsPtr": func(c *auction.Credits) string {
		if c == nil {
			return "—"
		}
		return auction.FormatCredits(*c) + " credits"
	},
	"bp": func(p *int64) string {
		if p == nil {
			return "n/a"
		}
		return fmt.Sprintf("%d.%02d %%", *p/100, *p%100)
	},
	// The CLI's units and rounding (cmd/gleaner: offer show, market
	// offers), so that the console and the CLI show one node alike.
	"available": available,
	"gib":       gib,
	"tempC":     func(c int) string { return fmt.Sprintf("%d°C", c) },
	"watts":     func(w float64) string { return fmt.Sprintf("%.0f W", w) },
	"gpuHours": func(s int64) string {
		return strconv.FormatInt(s/3600, 10) + "." + fmt.Sprintf("%02d", s%3600*100/3600) + " GPU-h"
	},
	"uptime": func(s float64) string { return (time.Duration(s) * time.Second).Round(time.Second).String() },
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"whenPtr": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"short": func(s string) string {
		if len(s) > 16 {
			return s[:8] + "…" + s[len(s)-6:]
		}
		return s
	},
	"exit": func(p *int) string {
		if p == nil {
			return "—"
		}
		return strconv.Itoa(*p)
	},
	"prices": func(m map[string]auction.Credits) []tierPrice {
		var out []tierPrice
		for _, t := range []string{"bronze", "silver", "gold"} {
			if c, ok := m[t]; ok {
				out = append(out, tierPrice{t, c})
			}
		}
		return out
	},
	"inEffect":   inEffect,
	"counts":     countExplain,
	"failures":   failures,
	"gpuSummary": gpuSummary,
	"deref":      func(c *auction.Credits) auction.Credits { return *c },
}

type tierPrice struct {
	Tier  string
	Price auction.Credits
}

// tierPriceNow is a tier's price in effect, its base floor where a peak
// or the surge raises it, and why.
type tierPriceNow struct {
	Tier  string
	Price auction.Credits
	Base  auction.Credits // 0: the price is the base floor
	Why   string
}

// inEffect lists an offer's prices in effect, bronze first as prices
// does; an older node's view without them shows its floors.
func inEffect(o offerView) []tierPriceNow {
	var out []tierPriceNow
	for _, t := range []string{"bronze", "silver", "gold"} {
		base, ok := o.Prices[t]
		if !ok {
			continue
		}
		p := tierPriceNow{Tier: t, Price: base}
		if pv, ok := o.InEffect[t]; ok && pv.Price != base {
			p.Price, p.Base, p.Why = pv.Price, base, pv.Why
		}
		out = append(out, p)
	}
	return out
}

// gpuSummary: "2× RTX4090 24 GiB", models in order of first appearance.
func gpuSummary(gs []auction.GPU) string {
	type k struct {
		model string
		vram  int
	}
	var order []k
	n := map[k]int{}
	for _, g := range gs {
		key := k{g.Model, g.VRAMMiB}
		if n[key] == 0 {
			order = append(order, key)
		}
		n[key]++
	}
	var b bytes.Buffer
	for i, key := range order {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d× %s %s", n[key], key.model, gib(key.vram))
	}
	return b.String()
}

// gib is a GPU's memory in whole GiB, rounded as the CLI rounds it: an
// RTX 4090's 24564 MiB is 24 GiB, not 23.
func gib(mib int) string {
	return strconv.FormatFloat(float64(mib)/1024, 'f', 0, 64) + " GiB"
}

// available is how long an offer is available ahead, as the CLI's
// AVAILABLE column says it: in whole minutes, and 7d+ for an offer
// available to the end of its 7-day horizon.
func available(secs int64) string {
	if secs >= 7*24*3600-60 {
		return "7d+"
	}
	return (time.Duration(secs/60) * time.Minute).String()
}
