package auction

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrBadQuery wraps every ParseQuery and order error, so the RPC layer can
// answer "invalid params" with the message as is.
var ErrBadQuery = errors.New("bad query")

// Query limits: a query arrives over RPC and must not cost unbounded work.
const (
	MaxQueryLen     = 4096
	MaxQueryClauses = 64
	MaxQueryValues  = 64 // per in/notin list
)

type op int

const (
	opEq op = iota
	opNe
	opLt
	opLe
	opGt
	opGe
	opIn
	opNotIn
)

var opNames = [...]string{"=", "!=", "<", "<=", ">", ">=", "in", "notin"}

// Query is a parsed conjunction of clauses. It is immutable, so one Query
// may be used from many goroutines.
type Query struct {
	clauses []clause
	gpu     []*clause // the gpu clauses, which select GPUs for gpus, vram, cc
	// start and secs are the job window prices are read over (At);
	// start 0 means now.
	start, secs int64
}

// At is q reading prices over the job window [start, start+dur) instead
// of at the instant the query runs: the window a silver job of
// duration.max dur would run now, or a gold reservation. q is unchanged.
func (q *Query) At(start time.Time, dur time.Duration) *Query {
	var c Query
	if q != nil {
		c = *q
	}
	c.start, c.secs = start.Unix(), int64(dur/time.Second)
	if start.IsZero() {
		c.start = 0
	}
	return &c
}

// window is the clock of one query run at now; a run over many offers
// gives it a memo (Book.Query), a single match does without.
func (q *Query) window(now int64) when {
	w := when{now: now, start: q.start, secs: q.secs}
	if w.start == 0 {
		w.start = now
	}
	return w
}

type clause struct {
	field  *fieldDef
	op     op
	raw    []string // values as written, for String and Explain
	nums   []int64  // ordered kinds, in fact units
	strs   []string // string kinds, normalised
	hashes []uint64 // gpu: modelHash of each of strs
	flag   bool     // kindBool
}

// String renders the clause canonically: "vram >= 40", "gpu in [H100,L4]".
func (c *clause) String() string {
	v := c.raw[0]
	if c.op == opIn || c.op == opNotIn {
		v = "[" + strings.Join(c.raw, ",") + "]"
	}
	return c.field.Name + " " + opNames[c.op] + " " + v
}

// String renders the query canonically; ParseQuery(q.String()) is q.
func (q *Query) String() string {
	parts := make([]string, len(q.clauses))
	for i := range q.clauses {
		parts[i] = q.clauses[i].String()
	}
	return strings.Join(parts, " ")
}

// Clauses lists the clauses in canonical form, in query order.
func (q *Query) Clauses() []string {
	out := make([]string, len(q.clauses))
	for i := range q.clauses {
		out[i] = q.clauses[i].String()
	}
	return out
}

// Match reports whether o satisfies every clause at now. Withdrawn and
// expired offers never match. Book.Query does the same with facts it
// derived once per offer; Match derives them each call.
func (q *Query) Match(o *Offer, now time.Time) bool {
	f := factsOf(o)
	if f.withdrawn || now.Unix() >= f.expires {
		return false
	}
	ctx := evalCtx{q: q, now: now.Unix(), w: q.window(now.Unix())}
	ctx.reset(&f)
	for i := range q.clauses {
		if !q.clauses[i].ok(&ctx) {
			return false
		}
	}
	return true
}

// evalCtx carries one offer through the clauses. The GPU selection is
// computed on first use and reused by later gpus/vram/cc clauses.
type evalCtx struct {
	q       *Query
	now     int64
	w       when
	f       *facts
	selDone bool
	sel     gpuSel
}

func (c *evalCtx) reset(f *facts) { c.f, c.selDone = f, false }

func (c *evalCtx) selection() *gpuSel {
	if !c.selDone {
		c.sel, c.selDone = c.q.selectGPUs(c.f), true
	}
	return &c.sel
}

// selectGPUs sums the GPU groups that every gpu clause accepts.
func (q *Query) selectGPUs(f *facts) gpuSel {
	if len(q.gpu) == 0 {
		return f.all
	}
	var s gpuSel
	for i := range f.groups {
		ok := true
		for _, c := range q.gpu {
			ok = ok && c.acceptsModel(&f.groups[i])
		}
		if ok {
			s = s.add(f.groups[i].sel)
		}
	}
	return s
}

func (c *clause) acceptsModel(g *gpuGroup) bool {
	in := false
	for i, h := range c.hashes {
		if h == g.hash && c.strs[i] == g.model {
			in = true
			break
		}
	}
	return in == (c.op == opEq || c.op == opIn)
}

// ok evaluates the clause. Negative operators on sets and strings mean
// "none of": workload!=service holds when the policy does not allow service.
func (c *clause) ok(ctx *evalCtx) bool {
	f := ctx.f
	positive := c.op == opEq || c.op == opIn
	switch c.field.kind {
	case kindCount, kindDecimal, kindDuration:
		var sel *gpuSel
		if c.field.sel {
			sel = ctx.selection()
		}
		if c.field.low != nil && (c.op == opLe || c.op == opLt || c.op == opEq) && c.field.low(f) > c.nums[0] {
			return false // its lower bound is above the bound: no need to compute it
		}
		x, present := c.field.num(f, sel, ctx.w)
		return present && compare(c.op, x, c.nums)
	case kindBool:
		return (c.field.flag(f) == c.flag) == positive
	case kindString:
		return contains(c.strs, c.field.str(f)) == positive
	case kindSet:
		hit := false
		for _, v := range c.strs {
			if c.field.has(f, v) {
				hit = true
				break
			}
		}
		return hit == positive
	case kindGPU:
		for i := range f.groups {
			if c.acceptsModel(&f.groups[i]) {
				return true
			}
		}
		return false
	}
	return false
}

func compare(o op, x int64, vs []int64) bool {
	switch o {
	case opEq:
		return x == vs[0]
	case opNe:
		return x != vs[0]
	case opLt:
		return x < vs[0]
	case opLe:
		return x <= vs[0]
	case opGt:
		return x > vs[0]
	case opGe:
		return x >= vs[0]
	}
	in := false
	for _, v := range vs {
		in = in || x == v
	}
	return in == (o == opIn)
}

// parseValue turns one written value into the clause's representation.
func (c *clause) parseValue(v string) error {
	fd := c.field
	switch fd.kind {
	case kindCount:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1e9 || v[0] == '+' {
			return fmt.Errorf("%s wants a whole number of %s, got %q", fd.Name, fd.Unit, v)
		}
		c.nums = append(c.nums, n)
	case kindDecimal:
		n, err := parseMicro(v)
		if err != nil {
			return fmt.Errorf("%s wants a decimal in %s: %v", fd.Name, fd.Unit, err)
		}
		c.nums = append(c.nums, n*fd.scale)
	case kindDuration:
		n, err := parseSeconds(v)
		if err != nil {
			return fmt.Errorf("%s wants a duration: %v", fd.Name, err)
		}
		c.nums = append(c.nums, n)
	case kindBool:
		if v != "true" && v != "false" {
			return fmt.Errorf("%s wants true or false, got %q", fd.Name, v)
		}
		c.flag = v == "true"
	default:
		s, err := fd.norm(v)
		if err != nil {
			return fmt.Errorf("%s: %v", fd.Name, err)
		}
		c.strs = append(c.strs, s)
		if fd.kind == kindGPU {
			c.hashes = append(c.hashes, modelHash(s))
		}
	}
	c.raw = append(c.raw, v)
	return nil
}

// parseSeconds is ParseDuration in whole seconds, the resolution of
// offer windows.
func parseSeconds(v string) (int64, error) {
	d, err := ParseDuration(v)
	if err != nil || d%time.Second != 0 {
		return 0, fmt.Errorf("%q: want a non-negative duration in whole seconds such as 90m, 4h, 2d or 1d12h", v)
	}
	return int64(d / time.Second), nil
}
