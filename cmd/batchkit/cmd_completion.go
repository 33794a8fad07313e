package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// The completion scripts ask the binary itself, so they never go stale: the
// words up to the cursor, the current one last (even when empty), then
// completionFlag. Main answers without running anything (complete.go). An
// empty answer means file names: after "--", in a flag's value, in the
// command's arguments.
const bashCompletion = `_batchkit_complete() {
  local cur=${COMP_WORDS[COMP_CWORD]} out
  out=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:COMP_CWORD}" --generate-bash-completion 2>/dev/null </dev/null)
  if [[ -n $out ]]; then
    mapfile -t COMPREPLY <<<"$out"
  else
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
  return 0
}
complete -F _batchkit_complete batchkit
`

const zshCompletion = `#compdef batchkit
_batchkit() {
  local out
  local -a opts
  out=$("${words[1]}" "${(@)words[2,CURRENT]}" --generate-bash-completion 2>/dev/null </dev/null)
  if [[ -n $out ]]; then
    opts=("${(@f)out}")
    compadd -- "${opts[@]}"
  else
    _files
  fi
}
if [[ $funcstack[1] == _batchkit ]]; then
  _batchkit "$@"
else
  compdef _batchkit batchkit
fi
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
