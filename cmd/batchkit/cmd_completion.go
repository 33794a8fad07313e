package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// Completion scripts ask the binary itself (urfave/cli's
// --generate-bash-completion), so they never go stale.
const bashCompletion = `_batchkit_complete() {
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
complete -o bashdefault -o default -F _batchkit_complete batchkit
`

const zshCompletion = `#compdef batchkit
_batchkit() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _batchkit batchkit
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash or zsh)",
		ArgsUsage: "bash|zsh",
		Description: `Examples:
   source <(batchkit completion bash)
   batchkit completion zsh > "${fpath[1]}/_batchkit"`,
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("completion takes one shell, bash or zsh, got %d arguments", c.NArg())
			}
			switch c.Args().First() {
			case "bash":
				fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				fmt.Fprint(c.App.Writer, zshCompletion)
			default:
				return usagef("completion needs a shell: bash or zsh, got %q", c.Args().First())
			}
			return nil
		},
	}
}
