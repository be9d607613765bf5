package main

import (
	"math"

	"github.com/urfave/cli/v2"
)

// NaN and ±Inf parse as floats ("NaN", "inf", YAML's .nan) and pass
// every range check, since NaN compares false with everything; they then
// fail far from the flag (json: unsupported value: NaN). Every float a
// command reads is checked with finite where it is read.

// finite refuses NaN and ±Inf in the option called name.
func finite(name string, v float64, hint string) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return usagef(hint, "%s %v: want a finite number", name, v)
	}
	return nil
}

// finiteFlags checks the named float flags that were given.
func finiteFlags(c *cli.Context, hint string, names ...string) error {
	for _, name := range names {
		if c.IsSet(name) {
			if err := finite("--"+name, c.Float64(name), hint); err != nil {
				return err
			}
		}
	}
	return nil
}
