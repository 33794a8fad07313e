# Removes a variable and changes another.
unset GOES_AWAY
export CHANGED="new $CHANGED"
