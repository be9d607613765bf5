package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/urfave/cli/v2"
)

// The scripting contract (README): a usage error is one line plus a hint
// and exit code 2, whatever the command and however deep; under --json a
// failure is one JSON object on stderr; global flags work before and after
// the subcommand. This file holds what makes urfave/cli keep it.

// prepareCommands gives every command of the tree, at any depth, the
// contract's usage errors and a `help` subcommand, and turns urfave/cli's
// required flags (which print the whole help) into usage errors.
func prepareCommands(app *cli.App) {
	// A command named help keeps urfave/cli from adding its own, and its
	// --help flag with it: add that one back.
	app.Flags = append(app.Flags, cli.HelpFlag)
	app.Commands = append(app.Commands, helpCommandAt(nil, false))
	app.OnUsageError = onUsageError
	app.CommandNotFound = func(c *cli.Context, name string) {
		notFound = usagef("see `"+cmdPath(c)+" --help` for the list of commands", "unknown command %q", name)
	}
	var walk func(cmds []*cli.Command, path []string)
	walk = func(cmds []*cli.Command, path []string) {
		for _, c := range cmds {
			p := append(slices.Clip(path), c.Name)
			c.OnUsageError = onUsageError
			switch {
			case len(c.Subcommands) > 0 && findCommand(c.Subcommands, "help") == nil:
				c.Subcommands = append(c.Subcommands, helpCommandAt(p, true))
			case len(c.Subcommands) == 0:
				// urfave/cli would give a leaf a help subcommand of its own,
				// without these usage errors; its --help prints the same.
				c.HideHelpCommand = true
				if c.CustomHelpTemplate == "" {
					c.CustomHelpTemplate = cli.CommandHelpTemplate
				}
			}
			requireFlags(c, p)
			walk(c.Subcommands, p)
		}
	}
	walk(app.Commands, nil)
}

func onUsageError(c *cli.Context, err error, _ bool) error {
	return usagef("see `"+cmdPath(c)+" --help`", "%s", flagMessage(err))
}

// cmdPath is the command line that c runs, e.g. "gleaner offer set".
func cmdPath(c *cli.Context) string {
	var names []string
	for _, x := range c.Lineage() {
		if x.Command != nil {
			names = append(names, x.Command.Name)
		}
	}
	if len(names) == 0 || names[len(names)-1] != "gleaner" {
		names = append(names, "gleaner") // the root command is named after the app
	}
	slices.Reverse(names)
	return strings.Join(names, " ")
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(\S+)$`)
	needsValue    = regexp.MustCompile(`^flag needs an argument: -+(\S+)$`)
	badValue      = regexp.MustCompile(`^invalid (boolean )?value ("[^"]*") for (?:flag )?-+([^:\s]+): `)
)

// flagMessage says a flag parse error of Go's flag package in the CLI's
// own words: flags as they are written, --name.
func flagMessage(err error) string {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		return "unknown flag " + dashed(m[1])
	}
	if m := needsValue.FindStringSubmatch(msg); m != nil {
		return dashed(m[1]) + " needs a value"
	}
	if m := badValue.FindStringSubmatchIndex(msg); m != nil {
		return fmt.Sprintf("invalid value %s for %s: %s", msg[m[4]:m[5]], dashed(msg[m[6]:m[7]]), msg[m[1]:])
	}
	return msg
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// helpCommandAt is `help [command...]` under the command at path (the
// app itself for nil): it prints what --help prints for that command.
func helpCommandAt(path []string, hidden bool) *cli.Command {
	where := strings.Join(append([]string{"gleaner"}, path...), " ")
	return &cli.Command{
		Name:      "help",
		Usage:     "show the help of " + where + " or of one of its commands",
		ArgsUsage: "[command...]",
		Hidden:    hidden,
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "report errors as JSON (the help itself is text)"}},
		Action: func(c *cli.Context) error {
			target := append(slices.Clip(path), c.Args().Slice()...)
			cmds := c.App.Commands
			for i, name := range target {
				next := findCommand(cmds, name)
				if next == nil || name == "help" && i >= len(path) {
					parent := strings.Join(append([]string{"gleaner"}, target[:i]...), " ")
					if i > 0 && len(cmds) == 0 {
						return usagef("see `"+parent+" --help`", "unexpected argument %q: `%s` has no subcommands", name, parent)
					}
					return usagef("see `"+parent+" --help` for the list of commands", "unknown command %q", name)
				}
				cmds = next.Subcommands
			}
			app := newApp(c.App.Writer, c.App.ErrWriter)
			return app.RunContext(c.Context, append(append([]string{"gleaner"}, target...), "--help"))
		},
	}
}

// requireFlags checks a command's required flags itself: urfave/cli
// prints the whole help when one is missing.
func requireFlags(c *cli.Command, path []string) {
	var names []string
	for _, f := range c.Flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			if f.Required {
				f.Required = false
				names = append(names, f.Name)
			}
		case *cli.IntFlag:
			if f.Required {
				f.Required = false
				names = append(names, f.Name)
			}
		}
	}
	if len(names) == 0 || c.Action == nil {
		return
	}
	action := c.Action
	c.Action = func(ctx *cli.Context) error {
		for _, n := range names {
			if !ctx.IsSet(n) {
				return usagef("see `gleaner "+strings.Join(path, " ")+" --help`", "%s is required", dashed(n))
			}
		}
		return action(ctx)
	}
}

// wantsJSON reports whether the command line asks for --json (before
// any "--"), so that even an error in parsing it is reported as JSON.
func wantsJSON(args []string) bool {
	want := false
	for _, a := range args[min(1, len(args)):] {
		if a == "--" {
			break
		}
		switch strings.TrimLeft(a, "-") {
		case "json", "json=true", "json=1":
			want = strings.HasPrefix(a, "-")
		case "json=false", "json=0":
			want = false
		}
	}
	return want
}

// reportJSON prints f as {"error": {...}}, one line.
func reportJSON(w io.Writer, f failure) {
	b, err := json.Marshal(struct {
		Error failure `json:"error"`
	}{f})
	if err != nil {
		fmt.Fprintf(w, "gleaner: %s\n", f.Message)
		return
	}
	fmt.Fprintf(w, "%s\n", b)
}

// withFlagNames says the node's errors about params in the CLI's flag
// names: a param named in flags (by its JSON name) is replaced by its
// flag wherever it is a whole word of the message.
func withFlagNames(err error, flags map[string]string) error {
	re, ok := err.(*rpc.Error) // as the client returns it, unwrapped
	if !ok {
		return err
	}
	msg := re.Message
	for param, flag := range flags {
		msg = regexp.MustCompile(`\b`+regexp.QuoteMeta(param)+`\b`).ReplaceAllString(msg, flag)
	}
	if msg == re.Message {
		return err
	}
	return &rpc.Error{Code: re.Code, Message: msg, Data: re.Data}
}

// offerParamFlags are offer_set's params whose names differ from
// `gleaner offer set`'s flags.
var offerParamFlags = map[string]string{
	"price_gold":         "--price.gold",
	"price_silver":       "--price.silver",
	"price_bronze":       "--price.bronze",
	"time_zone":          "--tz",
	"one_off":            "--one-off",
	"blackouts":          "--blackout",
	"images":             "--image",
	"max_duration":       "--max-duration",
	"preempt_notice":     "--notice",
	"max_temperature_c":  "--max-temp",
	"max_power_w":        "--max-power",
	"stop_temperature_c": "--stop-temp",
	"stop_power_w":       "--stop-power",
	"peak_gold":          "--peak.gold",
	"peak_silver":        "--peak.silver",
	"peak_bronze":        "--peak.bronze",
	"surge_cap":          "--surge-cap",
}
