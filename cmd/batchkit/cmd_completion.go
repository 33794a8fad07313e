package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// The completion scripts ask the binary itself, so they never go stale: the
// words up to the cursor, the current one last (even when empty), then
// clitree.CompletionFlag. Main answers without running anything (clitree). An
// empty answer means file names: after "--", in the command's arguments,
// in the value of a flag without values of its own (flagvalues.Flag) or when
// none of them fits.
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

// fish tokenizes the line itself (commandline -opc: the words before the
// cursor, unquoted; -ct: the one being completed, "" quoted so that an
// empty word is still passed). complete -f: the script falls back to file
// names itself, as the others do; -k keeps batchkit's order (the help's).
const fishCompletion = `function __batchkit_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    set -l out ($words[1] $words[2..-1] "$cur" --generate-bash-completion 2>/dev/null </dev/null)
    if set -q out[1]
        printf '%s\n' $out
    else
        __fish_complete_path "$cur"
    end
end
complete -c batchkit -f -k -a '(__batchkit_complete)'
`

// completionScripts are the shells 'batchkit completion' knows.
var completionScripts = map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: `Examples:
   source <(batchkit completion bash)
   batchkit completion zsh > "${fpath[1]}/_batchkit"
   batchkit completion fish > ~/.config/fish/completions/batchkit.fish`,
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return usagef("completion takes one shell, bash, zsh or fish, got %d arguments", c.NArg())
			}
			script, ok := completionScripts[c.Args().First()]
			if !ok {
				return usagef("completion needs a shell: bash, zsh or fish, got %q", c.Args().First())
			}
			_, err := fmt.Fprint(c.App.Writer, script)
			return err
		},
	}
}
