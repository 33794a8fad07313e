# Exports its positional parameters, to show what a script was given.
export ARGC=$#
export ARGS="$*"
