package main

import (
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/urfave/cli/v2"
)

// durationValue is a flag value in auction.ParseDuration's syntax, the one
// of job specs and queries, so --timeout 1d12h means what a spec's
// duration does (cli.DurationFlag would refuse the days).
type durationValue struct{ d time.Duration }

func (v *durationValue) Set(s string) error {
	d, err := auction.ParseDuration(s)
	if err != nil {
		return err
	}
	v.d = d
	return nil
}

func (v *durationValue) String() string {
	// No default is shown for zero: "run until Ctrl-C", not "0s".
	if v == nil || v.d == 0 {
		return ""
	}
	return v.d.String()
}

// durationFlag is a duration flag; read it with durationOf.
func durationFlag(name string, value time.Duration, usage string) *cli.GenericFlag {
	return &cli.GenericFlag{Name: name, Usage: usage, Value: &durationValue{value}}
}

func durationOf(c *cli.Context, name string) time.Duration {
	if v, ok := c.Generic(name).(*durationValue); ok {
		return v.d
	}
	return 0
}
