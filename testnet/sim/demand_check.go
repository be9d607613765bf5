package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/auction"
)

// CheckDemand checks every job of d before anything runs, so that a row
// the market cannot run fails the whole run at once, naming the row,
// instead of failing part-way through it. A job fails when:
//
//   - it names one model twice, under two spellings or under a trace's
//     code and its public name ("H800|H800-80GB");
//   - no provider of s has an acceptable model, is in its region, or has
//     as many GPUs of them there;
//   - its work is longer than the market can lease in one piece;
//   - the job spec its renter would send is one the market refuses.
//
// Prices and windows are not checked: those are the market's to settle.
// Problems alike are reported once, with the first row and how many more
// rows have them.
func CheckDemand(s *Supply, d *Demand) error { return checkDemand(s, d, nil) }

// maxProblems is how many kinds of problem an error lists.
const maxProblems = 20

func checkDemand(s *Supply, d *Demand, rows *demandRows) error {
	c := newDemandChecker(s)
	type problem struct {
		first string // where and what, for the first row
		more  []int  // the other rows' lines (or job indexes)
		n     int
	}
	problems := map[string]*problem{}
	var order []string
	bad := 0
	for i := range d.Jobs {
		found := c.check(&d.Jobs[i])
		if len(found) > 0 {
			bad++
		}
		for _, f := range found {
			p := problems[f.kind]
			if p == nil {
				p = &problem{first: rows.where(d, i) + ": " + f.msg}
				problems[f.kind] = p
				order = append(order, f.kind)
			} else if len(p.more) < 5 {
				if rows != nil && i < len(rows.lines) {
					p.more = append(p.more, rows.lines[i])
				} else {
					p.more = append(p.more, i)
				}
			}
			p.n++
		}
	}
	if bad == 0 {
		return nil
	}
	what := "the demand"
	if rows != nil {
		what = rows.name
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d jobs cannot run on this supply (every row was checked; nothing was simulated):", what, bad, len(d.Jobs))
	for k, kind := range order {
		if k == maxProblems {
			fmt.Fprintf(&b, "\n  and %d more kinds of problem", len(order)-k)
			break
		}
		p := problems[kind]
		b.WriteString("\n  " + p.first)
		if p.n > 1 {
			noun := "jobs"
			if rows != nil {
				noun = "lines"
			}
			list := make([]string, len(p.more))
			for i, x := range p.more {
				list[i] = fmt.Sprint(x)
			}
			if rows == nil {
				for i, x := range p.more {
					list[i] = d.Jobs[x].ID
				}
			}
			etc := ""
			if p.n-1 > len(p.more) {
				etc = ", ..."
			}
			fmt.Fprintf(&b, " (and %d more like it: %s %s%s)", p.n-1, noun, strings.Join(list, ", "), etc)
		}
	}
	return errors.New(b.String())
}

// rowProblem is one thing wrong with a job: kind groups problems alike
// across rows, msg says what is wrong with this one.
type rowProblem struct{ kind, msg string }

// demandChecker checks jobs against one supply, memoising what many jobs
// share.
type demandChecker struct {
	s       *Supply
	reach   map[string]modelReach
	specs   map[string]error
	fake    *simRenter // builds the spec a renter would send, as it would
	maxWork map[auction.Tier]int64
}

// modelReach is what the supply has for some models in a region.
type modelReach struct {
	modelFound, regionFound bool
	most                    int // GPUs of the largest such provider
	// atLeast[g] is how many such providers have g GPUs or more, 1..8:
	// a gang needs its members on as many distinct providers.
	atLeast [9]int
}

func newDemandChecker(s *Supply) *demandChecker {
	countries := map[string]bool{}
	for _, p := range s.Providers {
		countries[p.Country] = true
	}
	m := &market{w: newWorld(0), countries: keysOf(countries)}
	return &demandChecker{s: s, reach: map[string]modelReach{}, specs: map[string]error{},
		fake: &simRenter{m: m}, maxWork: map[auction.Tier]int64{}}
}

func (c *demandChecker) check(j *Job) []rowProblem {
	var out []rowProblem
	if p, ok := twiceNamed(j.Models); ok {
		out = append(out, p)
	}
	if p, ok := c.feasible(j); !ok {
		out = append(out, p)
	}
	if limit := c.longest(j.Tier); j.Duration > limit {
		out = append(out, rowProblem{"duration " + string(j.Tier), fmt.Sprintf(
			"duration_s %d (%s) is longer than the market can lease: a lease lasts at most %s and a renter asks for its work plus a margin, "+
				"so a %s job may have at most %d s (%s) of work; split it into parts",
			j.Duration, secsText(j.Duration), secsText(int64(auction.MaxJobDuration/time.Second)), j.Tier, limit, secsText(limit))})
	}
	if len(out) == 0 {
		if err := c.spec(j); err != nil {
			out = append(out, rowProblem{"spec " + err.Error(), err.Error()})
		}
	}
	return out
}

// twiceNamed finds a model named twice in one row: the same name in two
// cases, or a trace's code beside its public name (or two codes of one).
func twiceNamed(models []string) (rowProblem, bool) {
	canonical := func(m string) string {
		if tm, ok := modelFor(m); ok {
			return tm.Name
		}
		return m
	}
	seen := map[string]string{}
	for _, m := range models {
		key := strings.ToLower(canonical(m))
		prev, ok := seen[key]
		if !ok {
			seen[key] = m
			continue
		}
		name := canonical(prev)
		how := fmt.Sprintf("as %q and %q", prev, m)
		switch {
		case prev == m:
			how = fmt.Sprintf("as %q both times", m)
		case strings.EqualFold(prev, m):
			how += " (model names are case-insensitive)"
		default:
			how += fmt.Sprintf(" (a trace's code for %s and its name are one model)", name)
		}
		return rowProblem{"twice " + strings.Join(models, "|"), fmt.Sprintf(
			"gpu_models %q names %s twice, %s: name each model once", strings.Join(models, "|"), name, how)}, true
	}
	return rowProblem{}, false
}

// feasible says whether some provider has an acceptable model, in the
// job's region, with enough GPUs.
func (c *demandChecker) feasible(j *Job) (rowProblem, bool) {
	key := strings.Join(j.Models, "|") + "@" + j.Region
	r, ok := c.reach[key]
	if !ok {
		r = reachOf(c.s, j.Models, j.Region)
		c.reach[key] = r
	}
	models := "any model"
	if len(j.Models) > 0 {
		models = "model " + strings.Join(j.Models, "|")
	}
	where := "anywhere"
	if j.Region != "" {
		where = fmt.Sprintf("in region %q", j.Region)
	}
	switch {
	case !r.modelFound:
		msg := "no provider has " + models
		for _, m := range j.Models {
			if tm, ok := modelFor(m); ok && tm.Name != m {
				msg += fmt.Sprintf(" (%s is the trace's code for %s: name that)", m, tm.Name)
			}
		}
		return rowProblem{"models " + key, "gpu_models: " + msg}, false
	case !r.regionFound:
		return rowProblem{"region " + j.Region, fmt.Sprintf("region: no provider is in region %q", j.Region)}, false
	case r.most == 0:
		return rowProblem{"both " + key, fmt.Sprintf("gpu_models, region: no provider has %s %s", models, where)}, false
	case j.GPUs > r.most:
		return rowProblem{fmt.Sprintf("gpus %d %s", j.GPUs, key), fmt.Sprintf(
			"gpus %d: larger than any provider: the most GPUs any provider of %s %s has is %d", j.GPUs, models, where, r.most)}, false
	case j.Gang() && j.GPUs <= 8 && r.atLeast[j.GPUs] < j.Members:
		return rowProblem{fmt.Sprintf("members %d %d %s", j.Members, j.GPUs, key), fmt.Sprintf(
			"members %d: a gang needs as many distinct providers with gpus %d of %s %s; the supply has %d",
			j.Members, j.GPUs, models, where, r.atLeast[j.GPUs])}, false
	}
	return rowProblem{}, true
}

// reachOf is what s has for models (empty: any) in region ("" anywhere).
func reachOf(s *Supply, models []string, region string) modelReach {
	r := modelReach{modelFound: len(models) == 0, regionFound: region == ""}
	for i := range s.Providers {
		p := &s.Providers[i]
		mOK := len(models) == 0
		for _, m := range models {
			mOK = mOK || m == p.Model
		}
		rOK := regionServes(p, region)
		r.modelFound, r.regionFound = r.modelFound || mOK, r.regionFound || rOK
		if mOK && rOK {
			r.most = max(r.most, p.GPUs)
			for g := 1; g <= min(p.GPUs, 8); g++ {
				r.atLeast[g]++
			}
		}
	}
	return r
}

// spec builds the job spec j's renter would send, an hour long (the
// length is longest's to check), and has the market's parser check it; a
// gold job also as the silver job it becomes once its reservation is
// lost. Jobs alike share one check.
func (c *demandChecker) spec(j *Job) error {
	probe := *j
	probe.Duration = 3600
	// Before ResolveDemand a max price or a gold start may still be open:
	// the probe gets some, as ResolveDemand would give it.
	probe.MaxPrice = max(probe.MaxPrice, 1)
	if probe.Tier == auction.Gold && probe.Start == 0 {
		probe.Start = probe.Submit + 7200
	}
	key := fmt.Sprintf("%s|%d|%d|%s|%s|%t", j.Tier, j.MaxPrice, j.GPUs, j.Region, strings.Join(j.Models, "|"), j.Start > 0)
	if err, ok := c.specs[key]; ok {
		return err
	}
	err := c.specErr(&probe)
	c.specs[key] = err
	return err
}

// specErr is what the market's parser says of the specs j's renter
// would send, in the CSV's terms; nil if it takes them.
func (c *demandChecker) specErr(j *Job) error {
	attempts := []int{0}
	if j.Tier == auction.Gold {
		attempts = append(attempts, 1)
	}
	for _, a := range attempts {
		_, _, err := c.fake.spec(&simJob{j: j, id: j.ID, renter: c.fake, attempts: a})
		if err == nil {
			continue
		}
		var se *auction.SpecError
		if errors.As(err, &se) {
			return fmt.Errorf("%s: the market refuses the job spec its renter would send: %s: %s", csvColumnOf(se.Field), se.Field, se.Msg)
		}
		return fmt.Errorf("the market refuses the job spec its renter would send: %v", err)
	}
	return nil
}

// csvColumnOf names the demand CSV's column behind a job spec field.
func csvColumnOf(field string) string {
	switch {
	case strings.HasPrefix(field, "resources.models"):
		return "gpu_models"
	case strings.HasPrefix(field, "resources.gpus"):
		return "gpus"
	case strings.HasPrefix(field, "duration"):
		return "duration_s"
	case strings.HasPrefix(field, "placement"):
		return "region"
	case field == "start":
		return "start_s"
	case field == "max_price", field == "tier":
		return field
	}
	return "row"
}

// longest is the most seconds of work a job of tier t may have: the
// longest whose spec the market's parser takes, found by bisection on
// the spec itself, so that it follows the renter's margin and the
// market's limit wherever they are set.
func (c *demandChecker) longest(t auction.Tier) int64 {
	if w, ok := c.maxWork[t]; ok {
		return w
	}
	valid := func(secs int64) bool {
		j := Job{ID: "probe", Duration: secs, GPUs: 1, Tier: t, MaxPrice: 1, Kind: KindBatch}
		if t == auction.Gold {
			j.Start = 7200
		}
		return c.specErr(&j) == nil
	}
	lo, hi := int64(60), int64(maxSeconds)
	switch {
	case valid(hi):
		lo = hi
	case !valid(lo):
		lo = 0
	default:
		for hi-lo > 1 { // valid(lo), !valid(hi)
			mid := lo + (hi-lo)/2
			if valid(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	c.maxWork[t] = lo
	return lo
}

// secsText is seconds as days, hours and minutes: "40d0h0m".
func secsText(secs int64) string {
	if secs < 86400 {
		return (time.Duration(secs) * time.Second).String()
	}
	d := secs / 86400
	rest := time.Duration(secs%86400) * time.Second
	return fmt.Sprintf("%dd%dh%dm", d, int(math.Floor(rest.Hours())), int(rest.Minutes())%60)
}
