# Ends the shell instead of returning: written to be run, not sourced.
export LOST=1
exit 0
