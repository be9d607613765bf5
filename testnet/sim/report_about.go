package sim

import "fmt"

// StrategyAbout says what a strategy is, what it knows that a real
// participant might not, and what its renters pay, so that a reader can
// tell a fair comparison from a flattering one.
type StrategyAbout struct {
	What  string `json:"what"`
	Knows string `json:"knows"`
	Pays  string `json:"pays"`
}

// baselineKnows is what every central baseline knows and assumes.
const baselineKnows = "Everything, at once and for free: every provider's free GPUs, its windows (including when each closes) " +
	"and its reservations, and each job's exact length, so a silver job needs only its work, no margin, to fit before its window closes. " +
	"No latency, no messages, no losses. Cheating providers and non-paying renters act honestly under it (a hub is taken to vet them), " +
	"so its adversary rows show what cheaters would earn, not what they would get away with. " +
	"A gang (a job on several providers) is placed once enough distinct providers are free at once, with no rendezvous."

// AboutStrategy describes the strategy named name; hubFeeBP is the
// baselines' hub fee. An unknown name gets an empty description.
func AboutStrategy(name string, hubFeeBP int64) StrategyAbout {
	pays := fmt.Sprintf("The provider's floor for the job's tier plus the hub's fee (baseline.hubfeebp, %d bp, %.2f%%): no auction, no surge.",
		hubFeeBP, float64(hubFeeBP)/100)
	switch name {
	case MarketName:
		return StrategyAbout{
			What: "The decentralised market: every provider and renter is a node of the real market code (auctioneer, provider's desk and " +
				"scheduler, billing, reputation) over a simulated network with latency and loss. A renter auctions each job among up to " +
				"market.candidates providers it picks from gossiped offers, re-auctions after losses, and gives up after market.patience. " +
				"A gang's members are awarded one round each, held unstarted until all hold one, and stopped together (renter.Gang, as node's renter).",
			Knows: "A renter knows its own job, length included, and asks for a lease of the work plus market.leasemargin (gold: plus a minute), " +
				"so a silver job needs a window that much longer than its work, and places where its window and the offer's bookings " +
				"(bronze jobs' included) leave it undisturbed when any such offer is feasible. It sees providers only through their offers (gossiped, " +
				"a second late, listing windows and bookings for 7 days) and their quotes, and tells cheats apart only by ratings " +
				"(reputation recomputed every market.reputation) and by verification, which catches market.verifyshare of fake results. " +
				"A provider knows only its own GPUs, windows and leases.",
			Pays: "The auction's cleared price per GPU-hour (second-score: at least the winning bid, at most the job's max price), " +
				"paid one billing interval (market.billing) ahead; a provider that walks away keeps what was paid ahead.",
		}
	case BaselineRandom, BaselineFirstFit, BaselineCheapest:
		pick := map[string]string{
			BaselineRandom:   "picks one uniformly at random",
			BaselineFirstFit: "takes the one listed first",
			BaselineCheapest: "takes the one with the lowest floor",
		}[name]
		return StrategyAbout{
			What: "A central hub that places each job on arrival and retries every market.retry (5 min) until market.patience runs out: " +
				"among the providers with free GPUs that can serve the job it " + pick + ". A gold reservation gets one try, at arrival.",
			Knows: baselineKnows,
			Pays:  pays,
		}
	case BaselineCentralOnline:
		return StrategyAbout{
			What: "A central scheduler with one queue, as Vast's or Bacalhau's hub would be: it dispatches again at every event " +
				"(arrival, end, window opening) with best fit, reserves gold ahead and fills the gaps before reservations.",
			Knows: baselineKnows,
			Pays:  pays,
		}
	}
	return StrategyAbout{}
}
