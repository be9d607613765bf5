package console

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/ledger/trust"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// The reputation page: rep_show for this node (the owner's own standing,
// as this node computes it from the replicated ledger) or for a peer named
// in ?peer=, with each part the score is built from. The score is the one
// other nodes compute for themselves from the same feeds, not a figure
// anyone publishes, so the page says whose view it is.

type evidence = trust.Evidence

// partRow is one part of a reputation and its figure, as text.
type partRow struct {
	Part, Value string
}

// parts lists what a score is built from, in the order `gleaner rep show`
// prints them: outcomes by kind, probes, canaries, telemetry, and the
// peer's record as a renter. Only parts with something to count appear.
func parts(ev evidence) []partRow {
	var out []partRow
	for _, k := range slices.Sorted(maps.Keys(ev.Outcomes)) {
		out = append(out, partRow{"leases ended " + string(k), strconv.Itoa(ev.Outcomes[k])})
	}
	if len(ev.Probes) > 0 {
		out = append(out, partRow{"probes passed / failed / inconclusive", fmt.Sprintf("%d / %d / %d",
			ev.Probes[ledger.ProbePassed], ev.Probes[ledger.ProbeFailed], ev.Probes[ledger.ProbeInconclusive])})
	}
	if ev.CanaryStreak > 0 {
		out = append(out, partRow{"canaries passed in a row", strconv.Itoa(ev.CanaryStreak)})
	}
	if t := ev.Telemetry; t != nil {
		out = append(out, partRow{"telemetry: runs / signed samples verified / rejected", fmt.Sprintf("%d / %d / %d", t.Runs, t.Samples, t.Rejected)})
	}
	if len(ev.Payments) > 0 {
		out = append(out, partRow{"as renter: leases paid / unpaid", fmt.Sprintf("%d / %d", ev.Payments["paid"], ev.Payments["unpaid"])})
	}
	return out
}

// maxPeerParam bounds ?peer=: a peer ID is about 52 characters; the RPC
// checks the rest.
const maxPeerParam = 128

func (c *Console) reputation(w http.ResponseWriter, r *http.Request, se *session) {
	peer := strings.TrimSpace(r.URL.Query().Get("peer"))
	d := map[string]any{"Title": "Reputation", "Active": "reputation", "Peer": peer}
	if len(peer) > maxPeerParam {
		d["Peer"], d["PeerError"] = peer[:maxPeerParam], "peer ID too long (at most 128 characters)"
		c.render(w, r, http.StatusBadRequest, "reputation", se, d)
		return
	}
	var info nodeInfo
	if err := c.opts.Caller.Call(r.Context(), "node_info", nil, &info); err != nil {
		c.fail(w, r, se, "reputation", err)
		return
	}
	if peer == "" {
		peer = info.PeerID
	}
	d["Self"] = peer == info.PeerID
	var ev evidence
	err := c.opts.Caller.Call(r.Context(), "rep_show", map[string]string{"peer": peer}, &ev)
	var re *rpc.Error
	if errors.As(err, &re) && re.Code == rpc.CodeInvalidParams {
		d["PeerError"] = re.Message
		c.render(w, r, http.StatusOK, "reputation", se, d)
		return
	}
	if err != nil {
		c.fail(w, r, se, "reputation", err)
		return
	}
	d["Ev"], d["Parts"] = ev, parts(ev)
	c.render(w, r, http.StatusOK, "reputation", se, d)
}

func init() {
	// score: a reputation score (0..1) to three places, as `gleaner rep
	// show` prints it; "none" for a peer without paid history.
	funcs["score"] = func(s *float64) string {
		if s == nil {
			return "none (no paid history yet)"
		}
		return strconv.FormatFloat(*s, 'f', 3, 64) + " (0 to 1)"
	}
}
