package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"text/tabwriter"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/urfave/cli/v2"
)

var jsonFlag = &cli.BoolFlag{Name: "json", Usage: "print machine-readable JSON instead of text"}

// emit prints v as indented JSON when --json is set, else calls text.
func emit(c *cli.Context, v any, text func(w io.Writer)) error {
	w := c.App.Writer
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(w)
	return nil
}

// table writes aligned columns; the first row is the header.
func table(w io.Writer, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		for i, col := range r {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, col)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// credits prints an amount as the user reads it: exact decimal credits
// (the API's amounts are micro-credits, auction.Credits) and the unit.
func credits(c auction.Credits) string { return auction.FormatCredits(c) + " credits" }

// costAt is what gpus GPUs cost for d at price per GPU-hour, to the
// micro-credit (rounded down), in integers: big, so that no price and
// duration overflows.
func costAt(price auction.Credits, gpus int, d time.Duration) auction.Credits {
	c := new(big.Int).Mul(big.NewInt(int64(price)), big.NewInt(int64(gpus)))
	c.Mul(c, big.NewInt(int64(d)))
	c.Quo(c, big.NewInt(int64(time.Hour)))
	if !c.IsInt64() {
		return auction.Credits(math.MaxInt64)
	}
	return auction.Credits(c.Int64())
}
