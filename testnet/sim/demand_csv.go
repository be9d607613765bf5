package sim

// The canonical demand CSV (docs/SIM.md copies this block).
//
// One job per row, after a header that is exactly
//
//	submit_s,duration_s,gpus,gpu_models,tier,max_price,region,kind
//
// optionally followed by the trailing columns id, then id,renter, then
// id,renter,start_s, then id,renter,start_s,members, then
// ...,members,shards, then ...,members,shards,max_parallel (WriteDemandCSV
// writes eleven, twelve when some job is a gang, fourteen when some job
// is an array):
//
//	submit_s    whole seconds from the simulator's epoch (a Monday 00:00 UTC), 0..315360000
//	duration_s  whole seconds of work on the GPUs, 1..315360000
//	gpus        GPUs on one provider, 1..8
//	gpu_models  acceptable models separated by "|" ("A100-80GB|H800-80GB"); empty: any.
//	            A name is letters, digits and . _ + -
//	tier        gold (a reservation starting at start_s), silver (on demand, never
//	            preempted) or bronze (preemptible)
//	max_price   credits per GPU-hour, a decimal with at most 6 places ("1.25");
//	            empty or 0: resolved to a share (sim.DemandConfig.MaxPriceOfOnDemandBP)
//	            of the median on-demand price over the GPU-hours offered by the
//	            providers that could serve the job (any model: the supply's mix)
//	region      empty: anywhere; a lower-case continent code (af an as eu na oc sa);
//	            or an upper-case ISO 3166-1 country ("DE")
//	kind        training, batch, inference or serving
//	id          the job's name (letters, digits and . _ : / -); absent: j000000, j000001,
//	            ... in file order
//	renter      which renter submits it, 0..999999; absent: 0, and a run deals the
//	            jobs over sim.DemandConfig.Renters in turn instead (DealRenters)
//	start_s     gold only: the reserved window's start, not before submit_s; absent or
//	            0: submit_s plus the configured lead (sim.DemandConfig.GoldLead)
//	members     a gang (issue 36): 2..8 members, each running gpus GPUs on its own
//	            provider, placed, started and stopped together; absent or 1: not a
//	            gang. Silver or bronze only (a gang's reservation is not modelled).
//	shards      a job array (issue 36): 2..10000 independent shards, each a job of
//	            duration_s on gpus GPUs, placed and retried one by one; absent or 1:
//	            not an array. Silver or bronze, not a gang.
//	max_parallel at most this many of the array's shards placed at once, 1..shards;
//	            absent or 0: every shard at once. 0 unless the row is an array.
//
// Rows may come in any order; jobs are sorted by submit_s (stably). At most
// 5,000,000 rows, fields at most 1 KiB. An error names file:line:column
// (the field's number, from 1; for a CSV syntax error such as a stray
// quote, the byte's column), the field and what was wrong.

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
)

const (
	demandHeader  = "submit_s,duration_s,gpus,gpu_models,tier,max_price,region,kind"
	demandTrailer = "id,renter,start_s,members,shards,max_parallel"
	maxDemandRows = 5_000_000
	maxSeconds    = 10 * 365 * 86400 // ten years of virtual time
	maxRenters    = 1_000_000
	maxPrice      = 1_000_000 * 1_000_000 // a million credits per GPU-hour
)

// The job kinds.
const (
	KindTraining  = "training"
	KindBatch     = "batch"
	KindInference = "inference"
	KindServing   = "serving"
)

// LoadDemandCSV reads a demand CSV file.
func LoadDemandCSV(path string) (*Demand, error) {
	d, _, err := loadDemandCSV(path)
	return d, err
}

// ReadDemandCSV reads the canonical demand CSV; name is used in errors.
// Every renter it names is honest; ResolveDemand sets adversaries.
func ReadDemandCSV(r io.Reader, name string) (*Demand, error) {
	d, _, err := readDemandCSV(r, name)
	return d, err
}

// demandRows says where a demand's jobs came from, so that a problem
// found after reading (CheckDemand) can name the file and line.
type demandRows struct {
	name  string
	lines []int // lines[i] is the line of Demand.Jobs[i]
	// renterColumn is whether the file has the renter column: then it,
	// not demand.renters, says which renter submits each job.
	renterColumn bool
}

// where names job i: "demand.csv:17: job j5".
func (r *demandRows) where(d *Demand, i int) string {
	if r == nil || i >= len(r.lines) {
		return "job " + d.Jobs[i].ID
	}
	return fmt.Sprintf("%s:%d: job %s", r.name, r.lines[i], d.Jobs[i].ID)
}

func loadDemandCSV(path string) (*Demand, *demandRows, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return readDemandCSV(f, path)
}

func readDemandCSV(r io.Reader, name string) (*Demand, *demandRows, error) {
	in := newCSVIn(r, name)
	header, err := in.header(demandHeader, demandTrailer)
	if err != nil {
		return nil, nil, err
	}
	d := &Demand{}
	rows := &demandRows{name: name, renterColumn: len(header) > 9}
	maxRenter := -1
	for row := 0; ; row++ {
		rec, err := in.next(len(header))
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if row == maxDemandRows {
			return nil, nil, in.errf(-1, "more than %d rows", maxDemandRows)
		}
		j, bad := parseJob(rec)
		if bad != nil {
			return nil, nil, in.errf(bad.col, "%s: %s", strings.Split(demandHeader+","+demandTrailer, ",")[bad.col], bad.msg)
		}
		if len(rec) < 9 {
			j.ID = fmt.Sprintf("j%06d", row)
		}
		maxRenter = max(maxRenter, j.Renter)
		line, _ := in.cr.FieldPos(0)
		d.Jobs = append(d.Jobs, j)
		rows.lines = append(rows.lines, line)
	}
	order := make([]int, len(d.Jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return d.Jobs[order[a]].Submit < d.Jobs[order[b]].Submit })
	jobs, lines := make([]Job, len(order)), make([]int, len(order))
	for k, i := range order {
		jobs[k], lines[k] = d.Jobs[i], rows.lines[i]
	}
	d.Jobs, rows.lines = jobs, lines
	d.Renters = make([]Behaviour, maxRenter+1)
	d.Sources = []string{fmt.Sprintf("demand: %s, %d jobs", name, len(d.Jobs))}
	return d, rows, nil
}

// WriteDemandCSV writes d with eleven columns, twelve (members) when
// some job is a gang, fourteen (shards, max_parallel) when some job is an
// array (an expanded array's shards written back as its row), so that a
// demand without gangs or arrays is written as it was before them. It refuses a job that ReadDemandCSV would not read
// back as the same job.
func WriteDemandCSV(w io.Writer, d *Demand) error {
	d = collapseArrays(d) // an expanded array is written as its row
	cols := 11
	for i := range d.Jobs {
		if d.Jobs[i].IsArray() {
			cols = 14
			break
		}
		if d.Jobs[i].Gang() {
			cols = 12
		}
	}
	return writeDemandCSV(w, d, cols)
}

// WriteDemandCSVNoRenters writes d's jobs without the renter and start_s
// columns (nine columns, through id), for a demand that does not say who
// submits its jobs, such as a converted trace: a run then deals them over
// demand.renters (--renters). It refuses a job with a renter or a start.
func WriteDemandCSVNoRenters(w io.Writer, d *Demand) error { return writeDemandCSV(w, d, 9) }

func writeDemandCSV(w io.Writer, d *Demand, cols int) error {
	names := strings.Split(demandHeader+","+demandTrailer, ",")
	cw := csv.NewWriter(w)
	if err := cw.Write(names[:cols]); err != nil {
		return err
	}
	for i, j := range d.Jobs {
		rec := []string{
			strconv.FormatInt(j.Submit, 10), strconv.FormatInt(j.Duration, 10), strconv.Itoa(j.GPUs),
			strings.Join(j.Models, "|"), string(j.Tier), auction.FormatCredits(j.MaxPrice), j.Region, j.Kind,
			j.ID, strconv.Itoa(j.Renter), strconv.FormatInt(j.Start, 10), strconv.Itoa(j.Ranks()),
			strconv.Itoa(max(j.Shards, 1)), strconv.Itoa(j.MaxParallel),
		}
		back, bad := parseJob(rec[:cols])
		if bad != nil {
			return fmt.Errorf("job %d (%s): %s: %s", i, j.ID, names[bad.col], bad.msg)
		}
		if cols < 11 {
			back.Renter, back.Start = j.Renter, j.Start
			if j.Renter != 0 || j.Start != 0 {
				return fmt.Errorf("job %d (%s): has a renter or a start, which %d columns cannot hold", i, j.ID, cols)
			}
		}
		if cols < 12 {
			back.Members = j.Members
			if j.Gang() {
				return fmt.Errorf("job %d (%s): is a gang of %d, which %d columns cannot hold", i, j.ID, j.Members, cols)
			}
		}
		if cols < 14 {
			back.Shards, back.MaxParallel = j.Shards, j.MaxParallel
			if j.IsArray() {
				return fmt.Errorf("job %d (%s): is an array of %d shards, which %d columns cannot hold", i, j.ID, j.Shards, cols)
			}
		}
		if !sameJob(back, j) {
			return fmt.Errorf("job %d (%s): would not read back the same (models %q)", i, j.ID, j.Models)
		}
		if err := cw.Write(rec[:cols]); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// sameJob compares jobs field by field, an empty Models equal to nil.
func sameJob(a, b Job) bool {
	if len(a.Models) == 0 && len(b.Models) == 0 {
		a.Models, b.Models = nil, nil
	}
	a.Members, b.Members = a.Ranks(), b.Ranks() // 0 and 1 both say: not a gang
	a.Shards, b.Shards = max(a.Shards, 1), max(b.Shards, 1)
	return reflect.DeepEqual(a, b)
}

// badField is which field of a row is wrong and how.
type badField struct {
	col int // 0-based
	msg string
}

func bad(col int, format string, args ...any) *badField {
	return &badField{col, fmt.Sprintf(format, args...)}
}

// parseJob reads one row of 8 to 14 fields.
func parseJob(f []string) (Job, *badField) {
	var j Job
	var ok bool
	if j.Submit, ok = wholeIn(f[0], 0, maxSeconds); !ok {
		return j, bad(0, "%q is not a whole number 0..%d", f[0], maxSeconds)
	}
	if j.Duration, ok = wholeIn(f[1], 1, maxSeconds); !ok {
		return j, bad(1, "%q is not a whole number 1..%d", f[1], maxSeconds)
	}
	g, ok := wholeIn(f[2], 1, 8)
	if !ok {
		return j, bad(2, "%q is not a whole number 1..8", f[2])
	}
	j.GPUs = int(g)
	if f[3] != "" {
		j.Models = strings.Split(f[3], "|")
		for _, m := range j.Models {
			if !nameOK(m, "._+-") {
				return j, bad(3, "%q is not models separated by |, each letters, digits and . _ + -", f[3])
			}
		}
	}
	switch j.Tier = auction.Tier(f[4]); j.Tier {
	case auction.Gold, auction.Silver, auction.Bronze:
	default:
		return j, bad(4, "%q is not gold, silver or bronze", f[4])
	}
	if f[5] != "" {
		c, err := auction.ParseDecimalCredits(f[5])
		if err != nil || c > maxPrice {
			return j, bad(5, "%q is not credits 0..%s with at most 6 decimals", f[5], auction.FormatCredits(maxPrice))
		}
		j.MaxPrice = c
	}
	if j.Region = f[6]; !regionOK(j.Region) {
		return j, bad(6, "%q is not empty, a continent (af an as eu na oc sa) or an upper-case ISO country", f[6])
	}
	switch j.Kind = f[7]; j.Kind {
	case KindTraining, KindBatch, KindInference, KindServing:
	default:
		return j, bad(7, "%q is not training, batch, inference or serving", f[7])
	}
	if len(f) > 8 {
		if j.ID = f[8]; !nameOK(j.ID, "._:/-") {
			return j, bad(8, "%q is not a name of letters, digits and . _ : / -", f[8])
		}
	}
	if len(f) > 9 {
		r, ok := wholeIn(f[9], 0, maxRenters-1)
		if !ok {
			return j, bad(9, "%q is not a whole number 0..%d", f[9], maxRenters-1)
		}
		j.Renter = int(r)
	}
	if len(f) > 10 {
		if j.Start, ok = wholeIn(f[10], 0, maxSeconds); !ok {
			return j, bad(10, "%q is not a whole number 0..%d", f[10], maxSeconds)
		}
		if j.Start != 0 && j.Tier != auction.Gold {
			return j, bad(10, "%q: only gold jobs have a start (0 for %s)", f[10], j.Tier)
		}
		if j.Start != 0 && j.Start < j.Submit {
			return j, bad(10, "%q is before submit_s %d", f[10], j.Submit)
		}
	}
	if len(f) > 11 {
		m, ok := wholeIn(f[11], 1, auction.MaxGangMembers)
		if !ok {
			return j, bad(11, "%q is not a whole number 1..%d (1: not a gang)", f[11], auction.MaxGangMembers)
		}
		if m > 1 && j.Tier == auction.Gold {
			return j, bad(11, "%q: a gang is silver or bronze (a gang's reservation is not modelled)", f[11])
		}
		if m > 1 {
			j.Members = int(m)
		}
	}
	if len(f) > 12 {
		n, ok := wholeIn(f[12], 1, auction.MaxShards)
		switch {
		case !ok:
			return j, bad(12, "%q is not a whole number 1..%d (1: not an array)", f[12], auction.MaxShards)
		case n > 1 && j.Tier == auction.Gold:
			return j, bad(12, "%q: an array is silver or bronze (a reservation of shards is not modelled)", f[12])
		case n > 1 && j.Gang():
			return j, bad(12, "%q: a shard is one job, not a gang (members %d)", f[12], j.Members)
		case n > 1:
			j.Shards = int(n)
		}
	}
	if len(f) > 13 {
		p, ok := wholeIn(f[13], 0, auction.MaxShards)
		switch {
		case !ok:
			return j, bad(13, "%q is not a whole number 0..%d (0: every shard at once)", f[13], auction.MaxShards)
		case p > 0 && !j.IsArray():
			return j, bad(13, "%q: only an array has max_parallel (0 when shards is 1)", f[13])
		case p > int64(j.Shards):
			return j, bad(13, "%q is more than the array's %d shards", f[13], j.Shards)
		}
		j.MaxParallel = int(p)
	}
	return j, nil
}

// wholeIn parses plain decimal digits (no sign, no spaces) within [lo, hi].
func wholeIn(s string, lo, hi int64) (int64, bool) {
	if s == "" || len(s) > 18 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= lo && n <= hi
}

// nameOK: non-empty, ASCII letters, digits and the given punctuation.
func nameOK(s, punct string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune(punct, c)) {
			return false
		}
	}
	return true
}

// regionOK: empty, a continent code, or two upper-case letters.
func regionOK(s string) bool {
	switch s {
	case "", "af", "an", "as", "eu", "na", "oc", "sa":
		return true
	}
	return len(s) == 2 && 'A' <= s[0] && s[0] <= 'Z' && 'A' <= s[1] && s[1] <= 'Z'
}

// DemandCSVNamesRenters reads only the header of the demand CSV at path
// and says whether it has the renter column, which then decides each
// job's renter (demand.renters is not used).
func DemandCSVNamesRenters(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	header, err := newCSVIn(f, path).header(demandHeader, demandTrailer)
	if err != nil {
		return false, err
	}
	return len(header) > 9, nil
}
