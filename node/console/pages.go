package console

import (
	"errors"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// The pages. Each reads what it shows from the RPC, and nothing else.

func (c *Console) overview(w http.ResponseWriter, r *http.Request, se *session) {
	var info nodeInfo
	var bal balance
	var offer offerShow
	if err := c.opts.Caller.Call(r.Context(), "node_info", nil, &info); err != nil {
		c.fail(w, r, se, "overview", err)
		return
	}
	if err := c.opts.Caller.Call(r.Context(), "ledger_balance", nil, &bal); err != nil {
		c.fail(w, r, se, "overview", err)
		return
	}
	if err := c.opts.Caller.Call(r.Context(), "offer_show", nil, &offer); err != nil {
		c.fail(w, r, se, "overview", err)
		return
	}
	c.render(w, r, http.StatusOK, "overview", se, map[string]any{"Title": "Overview", "Active": "overview", "Info": info, "Balance": bal, "Offer": offer})
}

func (c *Console) gpus(w http.ResponseWriter, r *http.Request, se *session) {
	var offer offerShow
	if err := c.opts.Caller.Call(r.Context(), "offer_show", nil, &offer); err != nil {
		c.fail(w, r, se, "gpus", err)
		return
	}
	c.hist.record(c.opts.Now(), offer.GPUs) // history.go: what the charts draw
	c.render(w, r, http.StatusOK, "gpus", se, map[string]any{"Title": "GPUs", "Active": "gpus", "Offer": offer})
}

func (c *Console) jobs(w http.ResponseWriter, r *http.Request, se *session) {
	var jobs []jobRecord
	if err := c.opts.Caller.Call(r.Context(), "job_list", nil, &jobs); err != nil {
		c.fail(w, r, se, "jobs", err)
		return
	}
	c.render(w, r, http.StatusOK, "jobs", se, map[string]any{"Title": "Jobs", "Active": "jobs", "Jobs": jobRows(jobs)})
}

func (c *Console) job(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	var j jobRecord
	var ex jobExplain
	p := map[string]string{"id": id}
	if err := c.opts.Caller.Call(r.Context(), "job_status", p, &j); err != nil {
		c.fail(w, r, se, "jobs", err)
		return
	}
	if j.ArrayView != nil { // an array has no auction or output of its own: its shards do
		c.array(w, r, se, j)
		return
	}
	if err := c.opts.Caller.Call(r.Context(), "job_explain", p, &ex); err != nil {
		c.fail(w, r, se, "jobs", err)
		return
	}
	// The output's tail, for a browser without script; live.js follows
	// the rest. A node that cannot read it still shows the job.
	var logs jobLogs
	logsErr := ""
	if err := c.opts.Caller.Call(r.Context(), "job_logs", p, &logs); err != nil {
		logsErr = err.Error()
	}
	tail, cut := logTail(logs.Logs)
	c.render(w, r, http.StatusOK, "job", se, map[string]any{"Title": "Job " + j.Name, "Active": "jobs", "Job": j, "Explain": ex,
		"Logs": tail, "LogsCut": cut, "LogsError": logsErr, "Live": !terminalState(j.State), "Over": terminalState(j.State)})
}

// market is the offer book with the query language as its search box,
// and the book summarised (market_history.go): prices by model and tier
// over time against on-demand prices, supply by region. A bad query is
// the RPC's own invalid-params message, shown by the box.
func (c *Console) market(w http.ResponseWriter, r *http.Request, se *session) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	order := strings.TrimSpace(r.URL.Query().Get("order"))
	d := map[string]any{"Title": "Market", "Active": "market", "Q": q, "Order": order}
	if len(q) > 2000 || len(order) > 100 {
		d["Q"], d["Order"], d["QueryError"] = q[:min(len(q), 2000)], order[:min(len(order), 100)], "query too long (at most 2000 characters)"
		c.render(w, r, http.StatusBadRequest, "market", se, d)
		return
	}
	// The book's summary and the query each read the whole book: run
	// them side by side (marketData writes only stats, read after Wait).
	stats := map[string]any{}
	var statsErr error
	var wg sync.WaitGroup
	wg.Go(func() { statsErr = c.marketData(r.Context(), stats, r.URL.Query()) })
	var res marketOffers
	err := c.opts.Caller.Call(r.Context(), "market_offers", map[string]any{"query": q, "order": order, "limit": 100}, &res)
	wg.Wait()
	maps.Copy(d, stats)
	if statsErr != nil {
		d["StatsError"] = statsErr.Error() // the book's search still works
	}
	var re *rpc.Error
	if errors.As(err, &re) && re.Code == rpc.CodeInvalidParams {
		d["QueryError"] = re.Message
		c.render(w, r, http.StatusOK, "market", se, d)
		return
	}
	if err != nil {
		c.fail(w, r, se, "market", err)
		return
	}
	d["Res"] = res
	c.render(w, r, http.StatusOK, "market", se, d)
}

// maxRows bounds a page's per-lease table: a year of leases would be
// megabytes of HTML; the totals count every one.
const maxRows = 500

func (c *Console) earnings(w http.ResponseWriter, r *http.Request, se *session) {
	days := 14
	if d, err := strconv.Atoi(r.URL.Query().Get("days")); err == nil && d > 0 && d <= 366 {
		days = d
	}
	var e earnings
	if err := c.opts.Caller.Call(r.Context(), "ledger_earnings", map[string]int{"days": days}, &e); err != nil {
		c.fail(w, r, se, "earnings", err)
		return
	}
	labels := make([]string, len(e.Days))
	earned := make([]int64, len(e.Days))
	for i, d := range e.Days {
		labels[i] = d.Day
		if len(d.Day) == len("2006-01-02") {
			labels[i] = d.Day[5:] // the month and day: the axis has no room for years
		}
		earned[i] = int64(d.Earned)
	}
	chart := barChart("Earned per UTC day", labels, earned, func(v int64) string { return auction.FormatCredits(auction.Credits(v)) + " credits" })
	jobs, more := e.Jobs, 0
	if len(jobs) > maxRows { // the first maxRows; the totals above count them all
		jobs, more = jobs[:maxRows], len(jobs)-maxRows
	}
	c.render(w, r, http.StatusOK, "earnings", se, map[string]any{"Title": "Earnings", "Active": "earnings", "E": e, "Days": days, "Chart": chart, "Jobs": jobs, "More": more})
}
