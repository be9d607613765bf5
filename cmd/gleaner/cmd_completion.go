package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// bashCompletion asks the binary itself for candidates, so completion never
// drifts from the commands that exist. zsh loads it through bashcompinit.
const bashCompletion = `_gleaner_complete() {
  local cur opts
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  if [[ "$cur" == "-"* ]]; then
    opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
  return 0
}
complete -o bashdefault -o default -F _gleaner_complete gleaner
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: `Load it into your shell, for example:

   source <(gleaner completion bash)                 # in ~/.bashrc
   autoload -U bashcompinit && bashcompinit && source <(gleaner completion zsh)
   gleaner completion fish > ~/.config/fish/completions/gleaner.fish`,
		Action: func(c *cli.Context) error {
			switch c.Args().First() {
			case "bash", "zsh":
				fmt.Fprint(c.App.Writer, bashCompletion)
				return nil
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return err
				}
				fmt.Fprint(c.App.Writer, s)
				return nil
			default:
				return usagef("gleaner completion bash", "completion needs one shell: bash, zsh or fish")
			}
		},
	}
}
