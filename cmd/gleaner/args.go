package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a leaf command's flags ahead of its arguments, so that
// `gleaner market offers 'gpu=H100' --json` works as users expect:
// urfave/cli v2 stops parsing flags at the first argument. It knows which
// flags take a value from the command's own definitions; everything after
// "--" stays an argument.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	cmds, flags := app.Commands, app.Flags
	i := 1
	var leaf *cli.Command
	for i < len(args) {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			out = append(out, a)
			if takesValue(flags, a) && i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			i++
			continue
		}
		next := findCommand(cmds, a)
		if next == nil {
			break
		}
		out = append(out, a)
		leaf, cmds, flags = next, next.Subcommands, next.Flags
		i++
	}
	if leaf == nil || len(leaf.Subcommands) > 0 {
		return args
	}
	var fl, pos []string
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			fl = append(fl, a)
			if takesValue(flags, a) && i+1 < len(args) {
				fl = append(fl, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	out = append(out, fl...)
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	return out
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// takesValue reports whether flag token a (e.g. "-o", "--limit") names a
// non-boolean flag written without "=value".
func takesValue(flags []cli.Flag, a string) bool {
	if strings.Contains(a, "=") {
		return false
	}
	name := strings.TrimLeft(a, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
