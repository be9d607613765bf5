package console

import (
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// The offer's settings as a form. GET shows offer_show's settings in the
// syntax `gleaner offer set` takes; POST sends offer_set only the fields
// whose text changed from what the form showed (its hidden was_ fields),
// so a field left alone never overwrites anything, not even a change
// made meanwhile from the CLI. A refused value is the
// RPC's own message ("price_bronze: ..."), shown by its field, with
// every field as the user typed it.

// offerSettings is offer_show's settings, week and offer, as the offer
// and calendar pages read them.
type offerSettings struct {
	Offered  bool   `json:"offered"`
	Reason   string `json:"reason"`
	Settings struct {
		Region   auction.Region   `json:"region"`
		Prices   auction.Prices   `json:"prices"`
		Calendar auction.Calendar `json:"calendar"`
		Pricing  auction.Pricing  `json:"pricing"`
		Policy   auction.Policy   `json:"policy"`
		Limits   attest.Limits    `json:"limits"`
		Paused   bool             `json:"paused"`
	} `json:"settings"`
	Week  *auction.PriceWeek `json:"week"`
	Offer *offerView         `json:"offer"`
}

// offerField is one input of the form: Name is offer_set's parameter.
type offerField struct {
	Name, Label, Help string
	Kind              string // text, textarea, bool, int, float, list (comma-separated), lines
	Value             string
	Was               string // the value the form was shown with: a field is sent when Value differs
	Error             string
}

// offerFields, in the form's order, with `gleaner offer set`'s help.
var offerFields = []offerField{
	{Name: "region", Label: "Region", Help: "continent/country, e.g. eu/DE, na/US", Kind: "text"},
	{Name: "price_gold", Label: "Gold floor", Help: "reserved jobs, credits per GPU-hour; 0 = do not offer gold", Kind: "text"},
	{Name: "price_silver", Label: "Silver floor", Help: "on-demand jobs, credits per GPU-hour; 0 = do not offer silver", Kind: "text"},
	{Name: "price_bronze", Label: "Bronze floor", Help: "preemptible jobs, credits per GPU-hour; 0 = do not offer bronze", Kind: "text"},
	{Name: "time_zone", Label: "Time zone", Help: "IANA zone of the calendar, e.g. Europe/Berlin", Kind: "text"},
	{Name: "weekly", Label: "Weekly availability", Help: `e.g. "mon-fri 19:00-08:00; sat,sun 00:00-24:00"; empty = always`, Kind: "text"},
	{Name: "one_off", Label: "Extra windows", Help: "one START/END a line, RFC 3339", Kind: "lines"},
	{Name: "blackouts", Label: "Blackouts", Help: "unavailable windows, one START/END a line, RFC 3339", Kind: "lines"},
	{Name: "peak", Label: "Price periods", Help: `"DAYS HH:MM-HH:MM" then x1.5 and/or gold=2.0, ';'-separated; empty = none`, Kind: "text"},
	{Name: "surge", Label: "Surge", Help: "fully busy asks 1+SURGE times the floor in force, e.g. 0.5; 0 = none; at most 3", Kind: "text"},
	{Name: "surge_cap", Label: "Surge cap", Help: "most a surge may ask, as a multiple of the floor, e.g. 2x; 0 = the hard bound 4x", Kind: "text"},
	{Name: "workloads", Label: "Workloads", Help: "batch, service or batch,service", Kind: "list"},
	{Name: "images", Label: "Image allowlist", Help: "one pattern a line, e.g. ghcr.io/acme/*; empty = any image", Kind: "lines"},
	{Name: "max_duration", Label: "Longest job", Help: "e.g. 12h; 0 = no limit", Kind: "text"},
	{Name: "preempt_notice", Label: "Bronze notice", Help: "notice before a bronze job is preempted, e.g. 2m", Kind: "text"},
	{Name: "egress", Label: "Egress", Help: "let job containers reach the network", Kind: "bool"},
	{Name: "max_temperature_c", Label: "Withdraw above (°C)", Help: "0 = no limit", Kind: "int"},
	{Name: "max_power_w", Label: "Withdraw above (W)", Help: "0 = no limit", Kind: "float"},
	{Name: "stop_temperature_c", Label: "Stop jobs above (°C)", Help: "hard limit: every job on the GPU is stopped with its notice; 0 = none", Kind: "int"},
	{Name: "stop_power_w", Label: "Stop jobs above (W)", Help: "hard limit; 0 = none", Kind: "float"},
}

// settingsText is each field's current value as the form writes it.
func settingsText(o offerSettings) map[string]string {
	s := o.Settings
	loc, err := time.LoadLocation(s.Calendar.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	windows := func(ws []auction.Window) string {
		var out []string
		for _, w := range ws {
			out = append(out, time.Unix(w.Start, 0).In(loc).Format(time.RFC3339)+"/"+time.Unix(w.End, 0).In(loc).Format(time.RFC3339))
		}
		return strings.Join(out, "\n")
	}
	var weekly, peaks []string
	for _, ww := range s.Calendar.Weekly {
		weekly = append(weekly, strings.Join(ww.Days, ",")+" "+ww.Start+"-"+ww.End)
	}
	for _, pp := range s.Pricing.Periods {
		peaks = append(peaks, pp.String())
	}
	region := ""
	if s.Region.Continent != "" || s.Region.Country != "" {
		region = s.Region.Continent + "/" + s.Region.Country
	}
	return map[string]string{
		"region":             region,
		"price_gold":         auction.FormatCredits(s.Prices.Gold),
		"price_silver":       auction.FormatCredits(s.Prices.Silver),
		"price_bronze":       auction.FormatCredits(s.Prices.Bronze),
		"time_zone":          s.Calendar.TimeZone,
		"weekly":             strings.Join(weekly, "; "),
		"one_off":            windows(s.Calendar.OneOff),
		"blackouts":          windows(s.Calendar.Blackouts),
		"peak":               strings.Join(peaks, "; "),
		"surge":              auction.FormatBP(s.Pricing.SurgeBP),
		"surge_cap":          auction.FormatBP(s.Pricing.CapBP),
		"workloads":          strings.Join(s.Policy.Workloads, ","),
		"images":             strings.Join(s.Policy.Images, "\n"),
		"max_duration":       seconds(s.Policy.MaxDurationSec),
		"preempt_notice":     seconds(s.Policy.PreemptNotice),
		"egress":             strconv.FormatBool(s.Policy.Egress),
		"max_temperature_c":  strconv.Itoa(s.Limits.MaxTempC),
		"max_power_w":        strconv.FormatFloat(s.Limits.MaxPowerW, 'f', -1, 64),
		"stop_temperature_c": strconv.Itoa(s.Limits.StopTempC),
		"stop_power_w":       strconv.FormatFloat(s.Limits.StopPowerW, 'f', -1, 64),
	}
}

// seconds writes a duration as offer_set reads it: "0", "90s", "5m", "12h".
func seconds(s int64) string {
	switch {
	case s == 0:
		return "0"
	case s%3600 == 0:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s%60 == 0:
		return strconv.FormatInt(s/60, 10) + "m"
	}
	return strconv.FormatInt(s, 10) + "s"
}

// formValue reads one field from the form as the form writes it: line
// endings normalised, a checkbox as true/false.
func formValue(f offerField, form url.Values) string {
	if f.Kind == "bool" {
		return strconv.FormatBool(form.Get(f.Name) == "true")
	}
	v := strings.ReplaceAll(form.Get(f.Name), "\r\n", "\n")
	if f.Kind == "lines" {
		var out []string
		for _, l := range strings.Split(v, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	return strings.TrimSpace(v)
}

// patchParam is one changed field as offer_set's parameter, or the
// reason its text is not one (for the typed fields, which the RPC
// receives as numbers or booleans).
func patchParam(f offerField, v string) (any, string) {
	switch f.Kind {
	case "bool":
		return v == "true", ""
	case "int":
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, strconv.Quote(v) + ": want a whole number, 0 for none"
		}
		return n, ""
	case "float":
		// NaN and ±Inf parse, and NaN passes every range check (it
		// compares false with everything), then fails far from the field
		// (json: unsupported value: NaN).
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, strconv.Quote(v) + ": want a number of watts, 0 for none"
		}
		return x, ""
	case "lines":
		out := []string{}
		if v != "" {
			out = strings.Split(v, "\n")
		}
		return out, ""
	case "list":
		out := []string{}
		for _, w := range strings.Split(v, ",") {
			if w = strings.TrimSpace(w); w != "" {
				out = append(out, w)
			}
		}
		return out, ""
	}
	return v, ""
}

func (c *Console) offerPage(w http.ResponseWriter, r *http.Request, se *session) {
	var o offerSettings
	if err := c.opts.Caller.Call(r.Context(), "offer_show", nil, &o); err != nil {
		c.fail(w, r, se, "offer", err)
		return
	}
	cur := settingsText(o)
	fields := make([]offerField, len(offerFields))
	for i, f := range offerFields {
		f.Value, f.Was = cur[f.Name], cur[f.Name]
		fields[i] = f
	}
	c.render(w, r, http.StatusOK, "offer", se, map[string]any{"Title": "Offer", "Active": "offer", "Fields": fields, "O": o, "CSRF": se.csrf,
		"Saved": r.URL.Query().Get("saved") != ""})
}

// offerPost sends the changed fields to offer_set. A refusal names its
// field first ("region: ..."); the message goes by that field, or above
// the form when it is about the settings as a whole (calendar, pricing).
func (c *Console) offerPost(w http.ResponseWriter, r *http.Request, se *session) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	var o offerSettings
	if err := c.opts.Caller.Call(r.Context(), "offer_show", nil, &o); err != nil {
		c.fail(w, r, se, "offer", err)
		return
	}
	cur := settingsText(o)
	fields := make([]offerField, len(offerFields))
	patch := map[string]any{}
	bad := false
	for i, f := range offerFields {
		f.Value, f.Was = formValue(f, r.PostForm), cur[f.Name]
		if was, ok := r.PostForm["was_"+f.Name]; ok && len(was) == 1 {
			f.Was = formValue(offerField{Name: "w", Kind: f.Kind}, url.Values{"w": was})
		}
		if f.Value != f.Was {
			p, msg := patchParam(f, f.Value)
			if msg != "" {
				f.Error, bad = f.Name+": "+msg, true
			} else {
				patch[f.Name] = p
			}
		}
		fields[i] = f
	}
	again := func(code int, msg string) {
		c.render(w, r, code, "offer", se, map[string]any{"Title": "Offer", "Active": "offer", "Fields": fields, "O": o, "CSRF": se.csrf, "Error": msg})
	}
	if bad {
		again(http.StatusBadRequest, "Nothing was changed: correct the field marked below.")
		return
	}
	if len(patch) == 0 {
		http.Redirect(w, r, "/ui/offer?saved=unchanged", http.StatusSeeOther)
		return
	}
	err := c.opts.Caller.Call(r.Context(), "offer_set", patch, nil)
	var re *rpc.Error
	if errors.As(err, &re) && re.Code == rpc.CodeInvalidParams {
		field, _, _ := strings.Cut(re.Message, ": ")
		for i := range fields {
			if fields[i].Name == field {
				fields[i].Error = re.Message
				again(http.StatusBadRequest, "Nothing was changed: correct the field marked below.")
				return
			}
		}
		again(http.StatusBadRequest, "Nothing was changed: "+re.Message)
		return
	}
	if err != nil {
		again(http.StatusBadGateway, "Nothing was changed: "+err.Error())
		return
	}
	http.Redirect(w, r, "/ui/offer?saved=1", http.StatusSeeOther)
}
