package sim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The simulator is only worth its numbers if it runs the market code the
// node runs. This test reads both sides' sources and fails when either
// stops calling the shared code: node's /auction/1 and /lease/1 handlers
// must answer through auction/provider's Desk and claim through its
// Scheduler, node's renter must auction through auction/renter's Place
// and decide what follows each run by its Lifecycle, and the simulator's
// nodes must call exactly those.
func TestSimDrivesTheNodesMarketCode(t *testing.T) {
	root := filepath.Join("..", "..")
	cases := []struct {
		file, fn string
		want     []string
	}{
		{"node/providing/provider.go", "quote", []string{"pj.desk().Quote"}},
		{"node/providing/provider.go", "accept", []string{"pj.desk().CheckAward", "pj.commitAward"}},
		{"node/providing/provider.go", "claim", []string{"pj.sched.Claim", "sl.CounterSign"}}, // accept's, one award at a time (awardbatch.go)
		{"node/providing/provider.go", "desk", []string{}},
		{"node/renting/auction.go", "run", []string{"r.auc.Place", "renter.NewLifecycle", "life.Policy", "r.runEnded", "life.Unplaced"}},
		{"node/renting/auction.go", "runEnded", []string{"life.Ended"}},
		{"testnet/sim/sprovider.go", "quote", []string{"p.desk.Quote"}},
		{"testnet/sim/sprovider.go", "award", []string{"p.desk.CheckAward", "p.sched.Claim", "aw.Signed.CounterSign"}},
		{"testnet/sim/srenter.go", "place", []string{"r.auctioneer", "a.Place", "renter.NewLifecycle", "j.life.Policy", "j.life.Unplaced"}},
		{"testnet/sim/srenter.go", "auctioneer", []string{"renter.New"}},
		// Gangs (issue 36): both sides' drivers step renter.Gang, and
		// each member is awarded by the auctioneer's Place.
		{"node/renting/gang.go", "driveGang", []string{"run.g.Step"}},
		{"node/renting/gang.go", "submitGang", []string{"renter.GangFits", "renter.NewGang", "g.AwardTogether"}},
		{"node/renting/gang.go", "gangShares", []string{"renter.GangShares"}},
		{"node/renting/gang_member.go", "runMember", []string{"r.auc.Place"}},
		{"testnet/sim/srenter_gang.go", "submitGang", []string{"renter.NewGang", "sg.g.AwardTogether", "sg.g.Begin"}},
		{"testnet/sim/srenter_gang.go", "gangShares", []string{"renter.GangShares"}},
		{"testnet/sim/srenter_gang.go", "gangStep", []string{"sg.g.Step"}},
		{"testnet/sim/srenter_gang.go", "gangFits", []string{"renter.GangFits"}},
		{"testnet/sim/srenter_gang.go", "awardMember", []string{"auc.Place", "r.auctioneer"}},
		{"testnet/sim/srenter_end.go", "next", []string{"j.life.Ended"}},
		// Job arrays (issue 36): both sides' drivers step renter.Array
		// with what their shards' jobs did, and place each shard's job
		// as any job (the sim's through srenter.go's place).
		{"node/renting/array.go", "stepArray", []string{"run.a.Step"}},
		{"node/renting/array.go", "submitArray", []string{"renter.NewArray"}},
		{"testnet/sim/srenter_array.go", "submitArray", []string{"renter.NewArray"}},
		{"testnet/sim/srenter_array.go", "arrayStep", []string{"sa.a.Step", "r.place"}},
		{"testnet/sim/srenter_end.go", "finish", []string{"r.shardEnded"}},
		// Both auction a shard over the renter's own view of the book.
		{"node/renting/auction.go", "newAuctioneer", []string{"renter.NewOwnView"}},
		{"testnet/sim/srenter_array.go", "ownView", []string{"renter.NewOwnView"}},
		{"testnet/sim/srenter_array.go", "offersFor", []string{"r.ownView"}},
		{"testnet/sim/srenter.go", "place", []string{"r.offersFor"}},
		// Both publish their bookings by one rule (auction/bookings_pace.go).
		{"node/offers/publisher.go", "compareBookings", []string{"p.current.BookingsChanged"}},
		{"testnet/sim/sprovider.go", "compareBookings", []string{"p.offer.BookingsChanged"}},
		{"testnet/sim/sprovider.go", "changed", []string{"p.compareBookings"}},
	}
	for _, c := range cases {
		calls, lits := callsIn(t, filepath.Join(root, c.file), c.fn)
		for _, w := range c.want {
			if !slices.Contains(calls, w) {
				t.Errorf("%s: %s no longer calls %s (it calls %s)", c.file, c.fn, w, strings.Join(calls, ", "))
			}
		}
		if c.fn == "desk" && !slices.Contains(lits, "sched.Desk") {
			t.Errorf("%s: desk does not build an auction/provider Desk", c.file)
		}
	}
	// Both sides' desks and auctioneers come from the same packages.
	for _, f := range []string{"node/providing/provider.go", "testnet/sim/sprovider.go"} {
		if !importsPath(t, filepath.Join(root, f), "github.com/gleaner-net/gleaner/auction/provider") {
			t.Errorf("%s does not import auction/provider", f)
		}
	}
	for _, f := range []string{"node/renting/auction.go", "testnet/sim/srenter.go"} {
		if !importsPath(t, filepath.Join(root, f), "github.com/gleaner-net/gleaner/auction/renter") {
			t.Errorf("%s does not import auction/renter", f)
		}
	}
}

// callsIn lists the calls (as source text, "x.y.Z") and composite
// literal types made inside the function or method fn of file.
func callsIn(t *testing.T, file, fn string) (calls, lits []string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != fn || fd.Body == nil {
			continue
		}
		found = true
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				calls = append(calls, exprText(x.Fun))
			case *ast.CompositeLit:
				lits = append(lits, exprText(x.Type))
			}
			return true
		})
	}
	if !found {
		t.Fatalf("%s has no function %s", file, fn)
	}
	return calls, lits
}

func exprText(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprText(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		return exprText(x.Fun) + "()"
	case *ast.StarExpr:
		return exprText(x.X)
	case *ast.IndexExpr:
		return exprText(x.X)
	}
	return "?"
}

func importsPath(t *testing.T, file, path string) bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range f.Imports {
		if strings.Trim(im.Path.Value, `"`) == path {
			return true
		}
	}
	return false
}
