package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a leaf command's flags ahead of its arguments, so that
// `gleaner market offers 'gpu=H100' --json` works as users expect:
// urfave/cli v2 stops parsing flags at the first argument. It knows which
// flags take a value from the command's own definitions; everything after
// "--" stays an argument.
//
// It also lets the app's own flags (--repo) follow the subcommand,
// `gleaner init --repo DIR`, by moving them ahead of it, and --json
// precede it, `gleaner --json job ls`, by moving it to the leaf command
// when that has the flag.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	// Shell completion looks for its flag at the very end only.
	const complete = "--generate-bash-completion"
	if args[len(args)-1] == complete {
		return append(interspersed(app, args[:len(args)-1]), complete)
	}
	var global, path, jsonFlags []string
	cmds, flags := app.Commands, app.Flags
	depth := 0
	i := 1
	var leaf *cli.Command
	for i < len(args) {
		a := args[i]
		if a == "--" {
			break
		}
		if isFlag(a) {
			n := 1
			switch {
			case depth > 0 && isGlobal(a):
				if takesValue(app.Flags, a) && i+1 < len(args) {
					n = 2
				}
				global = append(global, args[i:i+n]...)
			case isJSON(a) && !hasFlag(flags, "json"):
				jsonFlags = append(jsonFlags, a) // for the leaf, if it has it
			default:
				if takesValue(flags, a) && i+1 < len(args) {
					n = 2
				}
				path = append(path, args[i:i+n]...)
			}
			i += n
			continue
		}
		next := findCommand(cmds, a)
		if next == nil {
			break
		}
		path = append(path, a)
		depth++
		leaf, cmds, flags = next, next.Subcommands, next.Flags
		i++
	}
	if len(jsonFlags) > 0 && (leaf == nil || !hasFlag(leaf.Flags, "json")) {
		path = append(path, jsonFlags...) // refused where it stands, as before
		jsonFlags = nil
	}
	rest := args[i:]
	if leaf != nil && len(leaf.Subcommands) == 0 {
		fl := jsonFlags
		var pos []string
		for ; i < len(args); i++ {
			a := args[i]
			if a == "--" {
				pos = append(pos, args[i+1:]...)
				break
			}
			if isFlag(a) {
				fs := &fl
				vf := flags
				if isGlobal(a) && !hasFlag(flags, flagName(a)) {
					fs, vf = &global, app.Flags
				}
				*fs = append(*fs, a)
				if takesValue(vf, a) && i+1 < len(args) {
					*fs = append(*fs, args[i+1])
					i++
				}
				continue
			}
			pos = append(pos, a)
		}
		rest = fl
		if len(pos) > 0 && !slices.ContainsFunc(fl, isHelp) { // `job status ID --help`: the help

			rest = append(append(rest, "--"), pos...)
		}
	} else {
		path = append(path, jsonFlags...)
	}
	out := append([]string{args[0]}, global...)
	out = append(out, path...)
	return append(out, rest...)
}

func isFlag(a string) bool { return strings.HasPrefix(a, "-") && len(a) > 1 }

// flagName is the name in a flag token: "--repo=x" -> "repo".
func flagName(a string) string {
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	return name
}

// isGlobal reports whether flag token a is one of the app's own flags,
// which may be given after the subcommand: --repo.
func isGlobal(a string) bool { return flagName(a) == "repo" }

func isJSON(a string) bool { return flagName(a) == "json" }

func isHelp(a string) bool { return a == "--help" || a == "-h" || a == "-help" }

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
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
