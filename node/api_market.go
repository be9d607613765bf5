package node

import (
	"context"
	"errors"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/rpc"
)

// MarketOffersParams are market_offers' parameters.
type MarketOffersParams struct {
	Query string `json:"query,omitempty" doc:"clauses such as 'gpu in [H100,A100-80GB] vram>=40 price.bronze<=1.5'; empty = every offer"`
	Order string `json:"order,omitempty" doc:"field to sort by, '-' prefix for descending, e.g. price.bronze or -vram"`
	Limit int    `json:"limit,omitempty" doc:"at most this many offers (default 100, max 10000)"`
	// Start and ForS name a job's window, [start, start+for_s): price
	// fields and in_effect are then the prices over it, as the job would
	// be quoted (a price period anywhere in it sets the floor for all of
	// it). Both absent: the prices in effect now.
	Start time.Time `json:"start,omitzero" doc:"the job's start (RFC 3339), for a gold reservation; absent = now"`
	ForS  int64     `json:"for_s,omitempty" doc:"the job's duration.max in seconds; absent = the instant start"`
}

// MarketOffersResult is market_offers' result.
type MarketOffersResult struct {
	Offers  []OfferView      `json:"offers"`
	Explain *auction.Explain `json:"explain"`
}

// QueryFieldsResult documents the query language.
type QueryFieldsResult struct {
	Fields []auction.FieldDoc `json:"fields"`
}

type marketAPI struct{ n *Node }

func registerMarketAPI(s *rpc.Server, n *Node) {
	a := marketAPI{n}
	rpc.Register(s, "market_offers", rpc.MethodDoc{
		Summary:     "Query the offer book. Fail-closed: an unknown field, operator or malformed value is an invalid-params error.",
		Description: "The explain part says how many offers each clause removed, so you can see why nothing matched. market_queryFields lists the fields.",
		ParamNames:  []string{"query", "order", "limit", "start", "for_s"},
	}, a.Offers)
	rpc.Register(s, "market_queryFields", rpc.MethodDoc{Summary: "The fields, types, units and operators of the offer query language."}, a.Fields)
	registerMarketStatsAPI(s, n) // api_market_stats.go
}

func (a marketAPI) Offers(ctx context.Context, p MarketOffersParams) (MarketOffersResult, error) {
	limit := p.Limit
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > 10000 {
		return MarketOffersResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: "limit: use 1 to 10000"}
	}
	q, err := auction.ParseQuery(p.Query)
	if err != nil {
		return MarketOffersResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: err.Error()}
	}
	now := time.Now()
	if p.ForS < 0 || p.ForS > 366*24*3600 {
		return MarketOffersResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: "for_s: use 0 to 31622400 (366 days)"}
	}
	start := p.Start
	if start.IsZero() {
		start = now
	}
	if !p.Start.IsZero() || p.ForS > 0 {
		q = q.At(p.Start, time.Duration(p.ForS)*time.Second)
	}
	offers, ex, err := a.n.market.Book().Query(q, p.Order, limit)
	if errors.Is(err, auction.ErrBadQuery) {
		return MarketOffersResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: err.Error()}
	}
	if err != nil {
		return MarketOffersResult{}, err
	}
	res := MarketOffersResult{Offers: make([]OfferView, 0, len(offers)), Explain: ex}
	for _, o := range offers {
		res.Offers = append(res.Offers, viewOfferAt(o, now, start, time.Duration(p.ForS)*time.Second))
	}
	return res, nil
}

func (a marketAPI) Fields(ctx context.Context, _ struct{}) (QueryFieldsResult, error) {
	return QueryFieldsResult{Fields: auction.QueryFields()}, nil
}
