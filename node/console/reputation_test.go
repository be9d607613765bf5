package console

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/rpc"
)

func TestReputationPage(t *testing.T) {
	score := 0.8125
	var asked []string
	f := &fakeCaller{results: map[string]any{
		"node_info": nodeInfo{PeerID: "12D3KooWSelf"},
		"rep_show": func(params any) (any, error) {
			p := params.(map[string]string)["peer"]
			asked = append(asked, p)
			if !strings.HasPrefix(p, "12D3KooW") {
				return nil, &rpc.Error{Code: rpc.CodeInvalidParams, Message: "peer: not a peer ID"}
			}
			if p == "12D3KooWNew" {
				return evidence{Peer: p, Outcomes: map[ledger.OutcomeResult]int{}}, nil
			}
			return evidence{Peer: p, Score: &score, Leases: 7, PaidTotal: 12_500_000,
				Outcomes:    map[ledger.OutcomeResult]int{ledger.OutcomeCompleted: 5, ledger.OutcomeFailed: 2},
				Probes:      map[ledger.ProbeResult]int{ledger.ProbePassed: 3, ledger.ProbeFailed: 1},
				Convictions: []ledger.Verdict{{Kind: "double-lease", Detail: "GPU 0 twice"}},
				Claim:       &attest.Claim{Simulated: true, GPUs: []attest.HardwareClaim{{Model: "RTX4090", VRAMMiB: 24576}}}}, nil
		},
	}}
	c := testConsole(t, f, nil)
	ck, _ := login(t, c)

	w := do(c, "GET", "/ui/reputation", nil, withCookie(ck))
	if w.Code != http.StatusOK || len(asked) != 1 || asked[0] != "12D3KooWSelf" {
		t.Fatalf("own reputation: %d, asked for %q", w.Code, asked)
	}
	mustContain(t, w.Body.String(), "This node's own reputation", `<dd id="score">0.812 (0 to 1)</dd>`, `<dd id="leases">7</dd>`,
		`<dd id="paid">12.5 credits</dd>`, "<td>leases ended completed</td><td>5</td>", "<td>leases ended failed</td><td>2</td>",
		"<td>probes passed / failed / inconclusive</td><td>3 / 1 / 0</td>", "CONVICTED</strong>: double-lease: GPU 0 twice",
		`1 GPU(s) <span class="tag">simulated</span>: RTX4090 24576 MiB`)

	w = do(c, "GET", "/ui/reputation?peer=12D3KooWNew", nil, withCookie(ck))
	mustContain(t, w.Body.String(), "Peer <code>12D3KooWNew</code>", "none (no paid history yet)", `id="no-parts"`)

	w = do(c, "GET", "/ui/reputation?peer=%3Cscript%3E", nil, withCookie(ck))
	mustContain(t, w.Body.String(), `id="peer-error"`, "Bad peer: peer: not a peer ID", `value="&lt;script&gt;"`)

	n := len(asked)
	w = do(c, "GET", "/ui/reputation?peer="+strings.Repeat("x", 200), nil, withCookie(ck))
	if w.Code != http.StatusBadRequest || len(asked) != n {
		t.Errorf("an overlong peer: %d, and the RPC was asked %d time(s)", w.Code, len(asked)-n)
	}
}

func TestEarningsPerJob(t *testing.T) {
	e := earnings{Earned: 3_000_000, Days: []earningsDay{{Day: "2026-05-04", Earned: 3_000_000}},
		Jobs: []earningsJob{
			{Day: "2026-05-04", JobID: "job-a", Renter: "12D3KooWRenterAAAAAAAA", Tier: "silver", GPUs: 2, GPUSeconds: 5400, Earned: 3_000_000, Settled: true},
			{Day: "2026-05-04", JobID: "job-b", Renter: "12D3KooWRenterBBBBBBBB", Tier: "bronze", GPUs: 1, GPUSeconds: 600},
		}}
	for i := 0; i < maxRows+3; i++ {
		e.Jobs = append(e.Jobs, earningsJob{Day: "2026-05-03", JobID: "old", Settled: true, Earned: 1})
	}
	c := testConsole(t, &fakeCaller{results: map[string]any{"ledger_earnings": e, "node_info": nodeInfo{}, "ledger_balance": balance{}, "offer_show": offerShow{}}}, nil)
	ck, _ := login(t, c)
	w := do(c, "GET", "/ui/earnings", nil, withCookie(ck))
	mustContain(t, w.Body.String(), `id="jobs-table"`, "<code class=\"job-id\">job-a</code>", "<td>silver</td><td>2</td><td>1.50 GPU-h</td><td>3 credits</td>",
		"<code class=\"job-id\">job-b</code>", "running (settles at its end)", "And 5 more")
}
