package sim

// The canonical supply CSV: one provider per row, after the header
//
//	id,model,vram_mib,gpus,country,continent,floor_gold,floor_silver,floor_bronze,windows
//
// floors are credits per GPU-hour as decimals ("1.25"; 0: that tier is not
// sold), windows are the idle windows as start-end seconds from the epoch
// separated by ";" ("0-3600;7200-86400"), sorted and disjoint. Every
// provider read is honest. This file also holds the CSV plumbing both
// canonical files share.

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gleaner-net/gleaner/auction"
)

const (
	supplyHeader = "id,model,vram_mib,gpus,country,continent,floor_gold,floor_silver,floor_bronze,windows"
	maxField     = 1 << 10
	maxRecord    = 16 << 10 // bytes of one record, checked before csv buffers it
)

// WriteSupplyCSV writes s's providers.
func WriteSupplyCSV(w io.Writer, s *Supply) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(strings.Split(supplyHeader, ",")); err != nil {
		return err
	}
	for _, p := range s.Providers {
		ws := make([]string, len(p.Windows))
		for i, x := range p.Windows {
			ws[i] = fmt.Sprintf("%d-%d", x.Start, x.End)
		}
		rec := []string{p.ID, p.Model, strconv.Itoa(p.VRAMMiB), strconv.Itoa(p.GPUs), p.Country, p.Continent,
			auction.FormatCredits(p.Floors.Gold), auction.FormatCredits(p.Floors.Silver),
			auction.FormatCredits(p.Floors.Bronze), strings.Join(ws, ";")}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// LoadSupplyCSV reads a supply CSV. onDemand (OnDemandPrices) prices each
// model so that renters' savings can be computed; a model it lacks is an
// error.
func LoadSupplyCSV(path string, onDemand map[string]auction.Credits) (*Supply, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	in := newCSVIn(f, path)
	if _, err := in.header(supplyHeader, ""); err != nil {
		return nil, err
	}
	s := &Supply{OnDemand: map[string]auction.Credits{}}
	seen := map[string]bool{}
	for {
		rec, err := in.next(10)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		p, b := parseProvider(rec)
		if b == nil && seen[p.ID] {
			b = bad(0, "%q appears twice", p.ID)
		}
		if b == nil {
			if od, ok := onDemand[p.Model]; ok {
				s.OnDemand[p.Model] = od
			} else {
				b = bad(1, "%q has no on-demand price in the price list", p.Model)
			}
		}
		if b != nil {
			return nil, in.errf(b.col, "%s: %s", strings.Split(supplyHeader, ",")[b.col], b.msg)
		}
		seen[p.ID] = true
		s.Providers = append(s.Providers, p)
	}
	s.Sources = []string{fmt.Sprintf("supply: %s, %d providers; on-demand prices from %s", path, len(s.Providers), priceListFile)}
	return s, nil
}

func parseProvider(f []string) (Provider, *badField) {
	p := Provider{ID: f[0], Model: f[1], Country: f[4], Continent: f[5]}
	if !nameOK(p.ID, "._:/-") {
		return p, bad(0, "%q is not a name of letters, digits and . _ : / -", f[0])
	}
	if !nameOK(p.Model, "._+-") {
		return p, bad(1, "%q is not a model name of letters, digits and . _ + -", f[1])
	}
	v, ok := wholeIn(f[2], 1, 1<<22)
	if !ok {
		return p, bad(2, "%q is not a whole number 1..%d", f[2], 1<<22)
	}
	g, ok := wholeIn(f[3], 1, 8)
	if !ok {
		return p, bad(3, "%q is not a whole number 1..8", f[3])
	}
	p.VRAMMiB, p.GPUs = int(v), int(g)
	if len(p.Country) != 2 || !regionOK(p.Country) {
		return p, bad(4, "%q is not an upper-case ISO country", f[4])
	}
	if len(p.Continent) != 2 || !regionOK(p.Continent) || p.Continent[0] < 'a' {
		return p, bad(5, "%q is not a continent (af an as eu na oc sa)", f[5])
	}
	for i, dst := range []*auction.Credits{&p.Floors.Gold, &p.Floors.Silver, &p.Floors.Bronze} {
		c, err := auction.ParseDecimalCredits(f[6+i])
		if err != nil || c > maxPrice {
			return p, bad(6+i, "%q is not credits 0..%s with at most 6 decimals", f[6+i], auction.FormatCredits(maxPrice))
		}
		*dst = c
	}
	if f[9] == "" {
		return p, nil
	}
	for _, w := range strings.Split(f[9], ";") {
		a, b, _ := strings.Cut(w, "-")
		start, ok1 := wholeIn(a, 0, maxSeconds)
		end, ok2 := wholeIn(b, 0, maxSeconds)
		if !ok1 || !ok2 || end <= start {
			return p, bad(9, "%q is not start-end seconds with start < end", w)
		}
		if n := len(p.Windows); n > 0 && start < p.Windows[n-1].End {
			return p, bad(9, "%q overlaps or precedes the window before it", w)
		}
		p.Windows = append(p.Windows, Span{start, end})
	}
	return p, nil
}

// csvIn reads a canonical CSV and says where a problem is:
// file:line:column, the column being the field's number from 1.
type csvIn struct {
	name string
	cr   *csv.Reader
	cols []string
}

func newCSVIn(r io.Reader, name string) *csvIn {
	cr := csv.NewReader(&recordLimiter{r: r, line: 1, start: 1})
	cr.FieldsPerRecord = -1 // counted here, to say which columns were expected
	return &csvIn{name: name, cr: cr}
}

// header reads the header: the required columns, then any leading part of
// the optional ones.
func (c *csvIn) header(required, optional string) ([]string, error) {
	expect := fmt.Sprintf("expected %q", required)
	if optional != "" {
		expect += " optionally followed by " + optional
	}
	rec, err := c.read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty, %s", c.name, expect)
	}
	if err != nil {
		return nil, err
	}
	rec[0] = strings.TrimPrefix(rec[0], "\ufeff")
	got := strings.Join(rec, ",")
	ok, want := got == required, required
	for _, col := range strings.Split(optional, ",") {
		if want += "," + col; col != "" && got == want {
			ok = true
		}
	}
	if !ok {
		return nil, fmt.Errorf("%s:1: header %q, %s", c.name, got, expect)
	}
	c.cols = rec
	return rec, nil
}

// next reads a record of n fields; io.EOF at the end.
func (c *csvIn) next(n int) ([]string, error) {
	rec, err := c.read()
	if err != nil {
		return nil, err
	}
	if len(rec) != n {
		return nil, c.errf(-1, "%d fields, expected %d (%s)", len(rec), n, strings.Join(c.cols, ","))
	}
	for i, f := range rec {
		if len(f) > maxField {
			return nil, c.errf(i, "%s: longer than %d bytes", c.cols[i], maxField)
		}
	}
	return rec, nil
}

func (c *csvIn) read() ([]string, error) {
	rec, err := c.cr.Read()
	var long *tooLong
	var pe *csv.ParseError
	switch {
	case err == nil || err == io.EOF:
		return rec, err
	case errors.As(err, &long):
		return nil, fmt.Errorf("%s:%d: a record longer than %d bytes", c.name, long.line, maxRecord)
	case errors.As(err, &pe):
		return nil, fmt.Errorf("%s:%d:%d: %v", c.name, pe.Line, pe.Column, pe.Err)
	}
	return nil, fmt.Errorf("%s: %w", c.name, err)
}

// errf is an error at field col (0-based) of the last record read, or at
// its line if col < 0.
func (c *csvIn) errf(col int, format string, args ...any) error {
	line, _ := c.cr.FieldPos(max(col, 0))
	if col < 0 {
		return fmt.Errorf("%s:%d: %s", c.name, line, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%s:%d:%d: %s", c.name, line, col+1, fmt.Sprintf(format, args...))
}

// recordLimiter fails a read once one record (up to a newline outside
// quotes) passes maxRecord bytes, so that a hostile file cannot make the
// csv reader buffer an endless line.
type recordLimiter struct {
	r           io.Reader
	n           int
	inQuote     bool
	line, start int
	err         error
}

type tooLong struct{ line int }

func (e *tooLong) Error() string { return fmt.Sprintf("line %d: record too long", e.line) }

func (l *recordLimiter) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for i := 0; i < n; i++ {
		switch p[i] {
		case '"':
			l.inQuote = !l.inQuote
		case '\n':
			l.line++
			if !l.inQuote {
				l.n, l.start = 0, l.line
				continue
			}
		}
		if l.n++; l.n > maxRecord {
			l.err = &tooLong{l.start}
			return i, l.err
		}
	}
	return n, err
}
