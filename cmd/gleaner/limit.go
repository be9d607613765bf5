package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// checkLimit refuses --limit outside 1..max before calling the node: the
// API reads a limit of 0 as "the default", so --limit 0 would otherwise
// show the default number of rows, not none, and say nothing.
func checkLimit(c *cli.Context, max int) error {
	if n := c.Int("limit"); n < 1 || n > max {
		return usagef(fmt.Sprintf("use --limit N with N from 1 to %d", max), "--limit %d: want 1 to %d", n, max)
	}
	return nil
}
